import { useEffect, useRef, useState } from "preact/hooks";
import { chf, count, dateTime } from "./format.js";
import { html } from "./html.js";
import { ErrorMessage } from "./widgets.js";

/** One key of the list: rename inline (Enter saves, Escape cancels), revoke after a confirmation. */
export function KeyRow({ apiKey, api, keysPath, onChanged }) {
  const [mode, setMode] = useState("view"); // view | rename | confirm-revoke
  const [name, setName] = useState(apiKey.name);
  const [error, setError] = useState(null);
  const active = apiKey.status === "active";
  // Where the focus goes once an action is over (the element that had it is gone): the row's Rename or
  // Revoke button, or the row itself (a revoked key has no buttons). Never the page's top (<body>).
  const [focusAfter, setFocusAfter] = useState(null); // null | rename | revoke | row
  const row = useRef(null);
  const renameButton = useRef(null);
  const revokeButton = useRef(null);
  useEffect(() => {
    if (mode !== "view" || focusAfter === null) return;
    const target = { rename: renameButton, revoke: revokeButton, row }[focusAfter].current ?? row.current;
    target?.focus();
    setFocusAfter(null);
  }, [mode, focusAfter, active]);

  async function run(action, focusTarget) {
    setError(null);
    try {
      await action();
      setMode("view");
      setFocusAfter(focusTarget);
      await onChanged();
    } catch (failure) {
      setError(failure);
    }
  }
  const rename = (event) => {
    event.preventDefault();
    run(() => api.patch(`${keysPath}/${apiKey.id}/update`, { name: name.trim() }), "rename");
  };
  const revoke = () => run(() => api.post(`${keysPath}/${apiKey.id}/revoke`), "row");
  /** Back to the name as it is, without the abandoned text or its error. */
  const cancelRename = () => {
    setName(apiKey.name);
    setError(null);
    setMode("view");
    setFocusAfter("rename");
  };
  const keepIt = () => {
    setMode("view");
    setFocusAfter("revoke");
  };

  const nameCell =
    mode === "rename"
      ? html`<form class="rename" onSubmit=${rename}>
          <label class="visually-hidden" for=${`rename-${apiKey.id}`}>New name for ${apiKey.name}</label>
          <input
            id=${`rename-${apiKey.id}`}
            maxlength="100"
            required
            value=${name}
            ref=${(el) => el?.focus()}
            onInput=${(e) => setName(e.currentTarget.value)}
            onKeyDown=${(e) => {
              if (e.key === "Escape") cancelRename();
            }}
          />
          <button type="submit" class="primary">Save</button>
          <button type="button" onClick=${cancelRename}>Cancel</button>
        </form>`
      : apiKey.name;

  return html`
    <tr data-key-id=${apiKey.id} class=${active ? "" : "revoked"} tabindex="-1" ref=${row}>
      <td data-label="Name" class="key-name">${nameCell}<${ErrorMessage} error=${error} /></td>
      <td data-label="Key"><code>${apiKey.masked_key}</code></td>
      <td data-label="Status"><span class=${`badge ${active ? "ok" : "muted"}`}>${active ? "Active" : "Revoked"}</span></td>
      <td data-label="Created">${dateTime(apiKey.created_at)}</td>
      <td data-label="Last used">${apiKey.last_used_at ? dateTime(apiKey.last_used_at) : "Never"}</td>
      <td data-label="Requests" class="num key-requests">${count(apiKey.usage.total_requests)}</td>
      <td data-label="Cost" class="num">${chf(apiKey.usage.total_cost_chf)}</td>
      <td class="actions">
        ${
          mode === "confirm-revoke"
            ? html`<div
                role="alertdialog"
                aria-labelledby=${`revoke-q-${apiKey.id}`}
                class="confirm"
                onKeyDown=${(e) => {
                  // Escape keeps the key, as a dialog closes (it did nothing).
                  if (e.key === "Escape") keepIt();
                }}
              >
                <p id=${`revoke-q-${apiKey.id}`}>Revoke “${apiKey.name}”? Every call with it will be refused (403) at once. This cannot be undone.</p>
                <button type="button" class="danger" onClick=${revoke}>Revoke key</button>
                <button type="button" onClick=${keepIt} ref=${(el) => el?.focus()}>Keep it</button>
              </div>`
            : active &&
              html`<button type="button" ref=${renameButton} onClick=${() => setMode("rename")} aria-label=${`Rename ${apiKey.name}`}>Rename</button>
                <button type="button" class="danger" ref=${revokeButton} onClick=${() => setMode("confirm-revoke")} aria-label=${`Revoke ${apiKey.name}`}>
                  Revoke
                </button>`
        }
      </td>
    </tr>
  `;
}
