import { useEffect, useState } from "preact/hooks";
import { chf, count, date, daysAgo, isoDay } from "./format.js";
import { html } from "./html.js";
import { CostChart } from "./costChart.js";
import { ErrorMessage, Figure } from "./widgets.js";

const USAGE_PATH = "/api/v1/accounts/user/usage";

/** Spent, held and remaining of this period's budget, as a bar with the figures written out beside it. */
function BudgetGauge({ period }) {
  const budget = period.budget_chf;
  // Any spending at all shows as at least a sliver.
  const pct = (part) => (budget > 0 && part > 0 ? Math.max(0.5, Math.min(100, (part / budget) * 100)) : 0);
  const spentPct = pct(period.spent_chf);
  const heldPct = Math.min(100 - spentPct, pct(period.held_chf));
  return html`
    <section class="card" aria-labelledby="budget-title">
      <h2 id="budget-title">Budget this billing period</h2>
      <p class="hint">${period.start} to ${period.end}; usage resets on ${date(period.resets_at)}.</p>
      <div
        class="gauge"
        role="meter"
        aria-valuemin="0"
        aria-valuemax=${budget}
        aria-valuenow=${period.spent_chf + period.held_chf}
        aria-valuetext=${`${chf(period.spent_chf)} spent and ${chf(period.held_chf)} held of ${chf(budget)}`}
        aria-labelledby="budget-title"
      >
        <span class="gauge-spent" style=${{ width: `${spentPct}%` }}></span>
        <span class="gauge-held" style=${{ width: `${heldPct}%` }}></span>
      </div>
      <dl class="figures">
        <${Figure} label="Spent" value=${chf(period.spent_chf)} id="budget-spent" />
        <${Figure} label="Held (requests running)" value=${chf(period.held_chf)} />
        <${Figure} label="Remaining" value=${chf(period.remaining_chf)} id="budget-remaining" />
        <${Figure} label="Monthly budget" value=${chf(budget)} />
        <${Figure} label="Resets on" value=${date(period.resets_at)} />
      </dl>
    </section>
  `;
}

function UsageTable({ title, rows, first, firstLabel }) {
  return html`
    <section class="card" aria-labelledby=${`${first}-title`}>
      <h2 id=${`${first}-title`}>${title}</h2>
      ${
        rows.length === 0
          ? html`<p>No requests in this period yet.</p>`
          : html`<div class="table-wrap">
              <table class="usage">
                <thead>
                  <tr>
                    <th scope="col">${firstLabel}</th>
                    <th scope="col" class="num">Requests</th>
                    <th scope="col" class="num">Prompt tokens</th>
                    <th scope="col" class="num">Completion tokens</th>
                    <th scope="col" class="num">Cost</th>
                    <th scope="col" class="num">Of which batch</th>
                  </tr>
                </thead>
                <tbody>
                  ${rows.map(
                    (row) => html`<tr>
                      <th scope="row">${row.label}</th>
                      <td class="num" data-label="Requests">${count(row.requests)}</td>
                      <td class="num" data-label="Prompt tokens">${count(row.prompt_tokens)}</td>
                      <td class="num" data-label="Completion tokens">${count(row.completion_tokens)}</td>
                      <td class="num" data-label="Cost">${chf(row.cost_chf)}</td>
                      <td class="num" data-label="Of which batch">${row.batch_requests ? `${chf(row.batch_cost_chf)} (${count(row.batch_requests)} lines)` : "–"}</td>
                    </tr>`,
                  )}
                </tbody>
              </table>
            </div>`
      }
    </section>
  `;
}

/** This period's Batch API spend (discounted lines), apart from the interactive spend. */
function BatchSpend({ total }) {
  return html`
    <section class="card" aria-labelledby="batch-spend-title">
      <h2 id="batch-spend-title">Batch and interactive spend, this billing period</h2>
      <dl class="figures">
        <${Figure} label="Batch (discounted)" value=${chf(total.batch_cost_chf)} id="batch-spend" />
        <${Figure} label="Batch lines" value=${count(total.batch_requests)} />
        <${Figure} label="Interactive" value=${chf(total.cost_chf - total.batch_cost_chf)} id="interactive-spend" />
      </dl>
    </section>
  `;
}

/** Budget gauge, daily cost of the last 30 days, and this period's usage by key and by model (the usage API). */
export function UsagePage({ api }) {
  const [usage, setUsage] = useState(null);
  const [error, setError] = useState(null);
  useEffect(() => {
    const now = new Date();
    const last30 = `start_date=${isoDay(daysAgo(now, 29))}&end_date=${isoDay(now)}`;
    Promise.all([
      api.get(`${USAGE_PATH}?${last30}&group_by=day`),
      api.get(`${USAGE_PATH}?group_by=key`),
      api.get(`${USAGE_PATH}?group_by=model`),
      api.get("/api/v1/accounts/user"),
    ]).then(([days, keys, models, user]) => setUsage({ days, keys, models, active: user.subscription.status === "active" }), setError);
  }, [api]);
  if (error) return html`<h1>Usage</h1><${ErrorMessage} error=${error} />`;
  if (!usage) return html`<h1>Usage</h1><p class="loading">Loading usage…</p>`;
  return html`
    <h1>Usage</h1>
    ${
      !usage.active &&
      html`<p class="notice" role="status" id="usage-inactive">
        Your subscription is not active: there is no budget, and every API call answers <code>402</code> until an operator activates it.
      </p>`
    }
    <${BudgetGauge} period=${usage.days.period} />
    <${CostChart} usage=${usage.days} />
    <${BatchSpend} total=${usage.models.total} />
    <${UsageTable}
      title="By key, this billing period"
      first="by-key"
      firstLabel="Key"
      rows=${usage.keys.data.map((row) => ({ ...row, label: row.name ?? row.key_id }))}
    />
    <${UsageTable} title="By model, this billing period" first="by-model" firstLabel="Model" rows=${usage.models.data.map((row) => ({ ...row, label: row.model }))} />
  `;
}
