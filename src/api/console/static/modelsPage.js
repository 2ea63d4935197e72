import { useEffect, useState } from "preact/hooks";
import { chf, count } from "./format.js";
import { html } from "./html.js";
import { SubscriptionCard } from "./accountPage.js";
import { ErrorMessage } from "./widgets.js";

/** The registry's models with their prices (CHF per million tokens) and context lengths. */
export function ModelsPage({ api }) {
  const [models, setModels] = useState(null);
  const [error, setError] = useState(null);
  useEffect(() => {
    api.get("/console/models").then((list) => setModels(list.data), setError);
  }, [api]);
  return html`
    <h1>Models and prices</h1>
    <${SubscriptionCard} api=${api} />
    <section class="card" aria-labelledby="models-title">
      <h2 id="models-title">Models</h2>
      <p class="hint">Prices are in CHF per million tokens; the cost of a request is charged to your monthly budget.</p>
      <${ErrorMessage} error=${error} />
      ${
        models &&
        html`<div class="table-wrap">
          <table class="models">
            <thead>
              <tr>
                <th scope="col">Model</th>
                <th scope="col" class="num">Context length</th>
                <th scope="col" class="num">Input</th>
                <th scope="col" class="num">Output</th>
                <th scope="col">Can do</th>
                <th scope="col">Status</th>
              </tr>
            </thead>
            <tbody>
              ${models.map(
                (m) => html`<tr>
                  <th scope="row"><code>${m.id}</code></th>
                  <td class="num" data-label="Context length">${count(m.context_length)} tokens</td>
                  <td class="num" data-label="Input">${chf(m.pricing.input_per_million_chf)}</td>
                  <td class="num" data-label="Output">${chf(m.pricing.output_per_million_chf)}</td>
                  <td data-label="Can do">${m.capabilities.join(", ")}</td>
                  <td data-label="Status"><span class=${`badge ${m.available ? "ok" : "muted"}`}>${m.available ? "Available" : "No worker"}</span></td>
                </tr>`,
              )}
            </tbody>
          </table>
        </div>`
      }
    </section>
  `;
}
