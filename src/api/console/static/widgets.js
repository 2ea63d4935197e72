import { html } from "./html.js";

/** An API failure, read out to screen readers as soon as it appears. */
export function ErrorMessage({ error }) {
  if (!error) return null;
  return html`<p class="error" role="alert">${error.message}</p>`;
}

/** A labelled figure of a summary row. */
export function Figure({ label, value, id }) {
  return html`<div class="figure"><dt>${label}</dt><dd id=${id}>${value}</dd></div>`;
}
