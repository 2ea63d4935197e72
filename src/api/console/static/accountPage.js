import { useEffect, useState } from "preact/hooks";
import { chf, date } from "./format.js";
import { html } from "./html.js";
import { KeysSection } from "./keysSection.js";
import { ErrorMessage } from "./widgets.js";

/** Subscription state, and what an inactive one means for API calls. */
export function SubscriptionCard({ api }) {
  const [user, setUser] = useState(null);
  const [error, setError] = useState(null);
  useEffect(() => {
    api.get("/api/v1/accounts/user").then(setUser, setError);
  }, [api]);
  if (error) return html`<${ErrorMessage} error=${error} />`;
  if (!user) return html`<p class="loading">Loading the subscription…</p>`;
  const active = user.subscription.status === "active";
  return html`
    <section class="card" aria-labelledby="subscription-title">
      <h2 id="subscription-title">Subscription</h2>
      <p>
        <span class=${`badge ${active ? "ok" : "warn"}`} id="subscription-status">${active ? "Active" : "Not active"}</span>
        ${active && html` Monthly budget <strong>${chf(user.subscription.monthly_budget_chf)}</strong>, resets on ${date(user.current_period.resets_at)}.`}
      </p>
      ${
        active
          ? html`<p class="hint">
              When this period's budget is used up, API calls answer <code>429</code> (<code>monthly_budget_exceeded</code>) until it resets.
            </p>`
          : html`<p>
              Without an active subscription every API call answers <code>402 Payment Required</code> (<code>subscription_required</code>). You can
              still create keys now; they work as soon as an operator activates your subscription.
            </p>`
      }
    </section>
  `;
}

export function AccountPage(props) {
  return html`
    <h1>Account settings</h1>
    <${SubscriptionCard} api=${props.api} />
    <${KeysSection} api=${props.api} onKeyCreated=${props.setPlaygroundKey} navigate=${props.navigate} />
  `;
}
