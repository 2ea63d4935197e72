import { useCallback, useEffect, useRef, useState } from "preact/hooks";
import { html } from "./html.js";
import { ErrorMessage } from "./widgets.js";
import { KeyRow } from "./keyRow.js";

const KEYS_PATH = "/api/v1/accounts/user/api-keys";
/** The server refuses a 6th active key (api_key_limit_reached). */
const MAX_ACTIVE_KEYS = 5;

/** The full key, shown once right after it was created, with a copy button. */
function NewKey({ created, onDone, navigate }) {
  const [copied, setCopied] = useState(false);
  async function copy() {
    try {
      await navigator.clipboard.writeText(created.key);
    } catch {
      // No clipboard permission: select the text so the user can copy it by hand.
      document.getElementById("new-key-value").select();
      return;
    }
    setCopied(true);
  }
  return html`
    <div class="card new-key" role="region" aria-labelledby="new-key-title">
      <h3 id="new-key-title">Your new key “${created.name}”</h3>
      <p class="warn-text"><strong>Copy it now: you will not see it again.</strong> Only a masked form is kept for display.</p>
      <div class="copy-row">
        <label class="visually-hidden" for="new-key-value">New API key</label>
        <input id="new-key-value" readonly value=${created.key} onFocus=${(e) => e.currentTarget.select()} />
        <button type="button" class="primary" onClick=${copy}>${copied ? "Copied" : "Copy"}</button>
      </div>
      <p role="status" class="hint">${copied ? "Copied to the clipboard." : ""}</p>
      <p class="hint">
        Use it as the API key of any OpenAI client, with base URL <code>${location.origin}/v1</code>, or try it in the${" "}
        <a
          href="/playground"
          onClick=${(e) => {
            e.preventDefault();
            navigate("/playground");
          }}
          >playground</a
        >.
      </p>
      <button type="button" onClick=${onDone}>I have saved it</button>
    </div>
  `;
}

/** The API Keys section: create, list (masked, with usage), rename inline, revoke with a confirmation. */
export function KeysSection({ api, onKeyCreated, navigate }) {
  const [keys, setKeys] = useState(null);
  const [name, setName] = useState("");
  const [created, setCreated] = useState(null);
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  const nameField = useRef(null);

  const [listFailed, setListFailed] = useState(false);
  const load = useCallback(async () => {
    try {
      setKeys((await api.get(KEYS_PATH)).data);
      setListFailed(false);
      // What the list shows now is current: an earlier error (a refused 6th key) is over.
      setError(null);
    } catch (failure) {
      setListFailed(true);
      setError(failure);
    }
  }, [api]);
  useEffect(() => {
    load();
  }, [load]);

  async function create(event) {
    event.preventDefault();
    setBusy(true);
    setError(null);
    try {
      const key = await api.post(`${KEYS_PATH}/create`, { name: name.trim() });
      setCreated(key);
      onKeyCreated(key.key);
      setName("");
      await load();
    } catch (failure) {
      // At the limit (a key made in another tab meanwhile): the list shows why, and Create is disabled.
      if (failure?.code === "api_key_limit_reached") await load();
      setError(failure);
    } finally {
      setBusy(false);
    }
  }

  const active = keys ? keys.filter((k) => k.status === "active").length : 0;
  const full = active >= MAX_ACTIVE_KEYS;
  return html`
    <section class="card" aria-labelledby="keys-title">
      <div class="section-head">
        <h2 id="keys-title">API Keys</h2>
        <button type="button" onClick=${load}>Refresh</button>
      </div>
      <p class="hint" id="key-limit">
        ${keys ? `${active} of ${MAX_ACTIVE_KEYS} active keys in use. ` : ""}${full ? "You have reached the limit: revoke a key you no longer use before creating another." : ""}
      </p>
      <form class="inline-form" onSubmit=${create}>
        <label for="new-key-name">Key name</label>
        <input
          id="new-key-name"
          ref=${nameField}
          maxlength="100"
          required
          placeholder="e.g. my laptop"
          value=${name}
          onInput=${(e) => setName(e.currentTarget.value)}
          aria-describedby="key-limit"
        />
        <button type="submit" class="primary" disabled=${busy || full}>Create key</button>
      </form>
      <${ErrorMessage} error=${error} />
      ${
        created &&
        html`<${NewKey}
          created=${created}
          onDone=${() => {
            setCreated(null);
            // The button that had the focus goes with the box: the focus goes back to the name field.
            nameField.current?.focus();
          }}
          navigate=${navigate}
        />`
      }
      ${
        !keys
          ? listFailed
            ? html`<p>Your keys could not be loaded. <button type="button" onClick=${load}>Try again</button></p>`
            : html`<p class="loading">Loading keys…</p>`
          : keys.length === 0
            ? html`<p>No keys yet. Create one to call the API.</p>`
            : html`
              <div class="table-wrap">
                <table class="keys">
                  <caption class="visually-hidden">Your API keys</caption>
                  <thead>
                    <tr>
                      <th scope="col">Name</th>
                      <th scope="col">Key</th>
                      <th scope="col">Status</th>
                      <th scope="col">Created</th>
                      <th scope="col">Last used</th>
                      <th scope="col" class="num">Requests</th>
                      <th scope="col" class="num">Cost</th>
                      <th scope="col"><span class="visually-hidden">Actions</span></th>
                    </tr>
                  </thead>
                  <tbody>
                    ${keys.map((key) => html`<${KeyRow} key=${key.id} apiKey=${key} api=${api} keysPath=${KEYS_PATH} onChanged=${load} />`)}
                  </tbody>
                </table>
              </div>
            `
      }
    </section>
  `;
}
