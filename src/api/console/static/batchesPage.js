import { useCallback, useEffect, useRef, useState } from "preact/hooks";
import { count, dateTime } from "./format.js";
import { html } from "./html.js";
import { cancelBatch, createBatch, fileContent, listBatches, saveBlob, uploadBatchFile } from "./batchApi.js";
import { ErrorMessage } from "./widgets.js";

const ENDPOINTS = ["/v1/chat/completions", "/v1/completions", "/v1/embeddings", "/v1/responses"];
/** Statuses after which a batch no longer changes. */
const ENDED = new Set(["completed", "failed", "expired", "cancelled"]);
const POLL_MS = 2_000;
/** How long typing an API key pauses before the batches are listed with it. */
const KEY_TYPING_PAUSE_MS = 400;

const STATUS_BADGES = { completed: "ok", failed: "warn", expired: "warn", cancelled: "muted", cancelling: "muted" };
const isoOf = (seconds) => (seconds ? new Date(seconds * 1000).toISOString() : null);

/**
 * A batch's progress: lines done (completed or failed) of its total, as a <progress> with the figures in
 * words; for a batch cancelled or expired, the lines completed.
 */
function BatchProgress({ batch }) {
  const { total, completed, failed } = batch.request_counts;
  // A cancelled or expired batch's lines not run count as failed: its bar shows the lines completed, not a full bar.
  const stopped = ["cancelling", "cancelled", "expired"].includes(batch.status);
  const done = stopped ? completed : completed + failed;
  const words = stopped
    ? `${count(completed)} of ${count(total)} lines completed; ${count(failed)} failed or not run (${batch.status === "expired" ? "expired" : "cancelled"})`
    : `${count(done)} of ${count(total)} lines done (${count(completed)} completed, ${count(failed)} failed)`;
  return html`
    <div class="batch-progress">
      <progress max=${Math.max(total, 1)} value=${total > 0 ? done : 0} aria-label=${`Progress of ${batch.id}`} aria-valuetext=${words}></progress>
      <span class="hint">${words}</span>
    </div>
  `;
}

/**
 * Upload a JSONL file, create a batch of it, follow the account's batches (status, progress, polled every
 * 2 s while any runs), cancel one, download its output and error files. Calls the public Files and Batch
 * APIs with one of the account's keys, like the playground.
 */
export function BatchesPage({ playgroundKey, setPlaygroundKey, navigate }) {
  const [endpoint, setEndpoint] = useState(ENDPOINTS[0]);
  const [file, setFile] = useState(null);
  const [busy, setBusy] = useState(false);
  const [batches, setBatches] = useState(null);
  const [error, setError] = useState(null);
  const [notice, setNotice] = useState("");
  const fileInput = useRef(null);

  const refresh = useCallback(async () => {
    if (!playgroundKey) return;
    try {
      setBatches(await listBatches(playgroundKey));
      // A list that loads clears what an earlier refresh failed with (a key typed half-way, an outage).
      setError((current) => (current?.fromRefresh ? null : current));
    } catch (failure) {
      failure.fromRefresh = true;
      setError(failure);
    }
  }, [playgroundKey]);

  // Listed once typing the key has paused, not at every keystroke (each half-typed key is a 403).
  useEffect(() => {
    const timer = setTimeout(refresh, KEY_TYPING_PAUSE_MS);
    return () => clearTimeout(timer);
  }, [refresh]);

  // Poll while any listed batch may still change.
  const running = batches?.some((b) => !ENDED.has(b.status)) ?? false;
  useEffect(() => {
    if (!running) return;
    const timer = setInterval(refresh, POLL_MS);
    return () => clearInterval(timer);
  }, [running, refresh]);

  async function submit(event) {
    event.preventDefault();
    if (!file) return;
    setBusy(true);
    setError(null);
    setNotice("");
    try {
      const uploaded = await uploadBatchFile(playgroundKey, file);
      const batch = await createBatch(playgroundKey, { inputFileId: uploaded.id, endpoint });
      setNotice(`Created ${batch.id} from ${uploaded.filename} (${count(uploaded.bytes)} bytes).`);
      setFile(null);
      if (fileInput.current) fileInput.current.value = "";
      await refresh();
    } catch (failure) {
      setError(failure);
    } finally {
      setBusy(false);
    }
  }

  async function cancel(batch) {
    setError(null);
    try {
      await cancelBatch(playgroundKey, batch.id);
      setNotice(`Cancelling ${batch.id}.`);
      await refresh();
    } catch (failure) {
      setError(failure);
    }
  }

  async function download(batch, fileId, kind) {
    setError(null);
    try {
      saveBlob(await fileContent(playgroundKey, fileId), `${batch.id}_${kind}.jsonl`);
    } catch (failure) {
      setError(failure);
    }
  }

  return html`
    <h1>Batches</h1>
    <section class="card" aria-labelledby="batch-create-title">
      <h2 id="batch-create-title">New batch</h2>
      <p class="hint">
        A JSONL file, one request a line: <code>{"custom_id": "…", "method": "POST", "url": "/v1/chat/completions", "body": {…}}</code>.
        Lines run when capacity is idle, within 24 hours, at the batch price.
      </p>
      <form class="stack" onSubmit=${submit}>
        <div class="row">
          <div class="stack grow">
            <label for="batch-key">API key</label>
            <input
              id="batch-key"
              type="password"
              autocomplete="off"
              required
              value=${playgroundKey}
              onInput=${(e) => setPlaygroundKey(e.currentTarget.value)}
              aria-describedby="batch-key-hint"
            />
          </div>
          <div class="stack grow">
            <label for="batch-endpoint">Endpoint</label>
            <select id="batch-endpoint" value=${endpoint} onChange=${(e) => setEndpoint(e.currentTarget.value)}>
              ${ENDPOINTS.map((e) => html`<option value=${e}>${e}</option>`)}
            </select>
          </div>
          <div class="stack grow">
            <label for="batch-file">Input file (JSONL)</label>
            <input id="batch-file" ref=${fileInput} type="file" accept=".jsonl,application/jsonl,application/x-ndjson,text/plain" required onChange=${(e) => setFile(e.currentTarget.files[0] ?? null)} />
          </div>
        </div>
        <p id="batch-key-hint" class="hint">
          The page calls the Files and Batch APIs like any client, so it needs one of your keys. A key you created on the${" "}
          <a
            href="/account"
            onClick=${(e) => {
              e.preventDefault();
              navigate("/account");
            }}
            >API keys page</a
          >${" "}
          during this visit is filled in; it is kept only in this page's memory.
        </p>
        <div class="row">
          <button type="submit" class="primary" disabled=${busy || !file || !playgroundKey}>${busy ? "Uploading…" : "Upload and create batch"}</button>
        </div>
        <p role="status" class="hint">${notice}</p>
        <${ErrorMessage} error=${error} />
      </form>
    </section>
    <section class="card" aria-labelledby="batch-list-title">
      <div class="section-head">
        <h2 id="batch-list-title">Your batches</h2>
        <button type="button" onClick=${refresh} disabled=${!playgroundKey}>Refresh list</button>
      </div>
      ${
        !playgroundKey
          ? html`<p>Enter an API key above to see the account's batches.</p>`
          : batches === null
            ? html`<p class="loading">Loading…</p>`
            : batches.length === 0
              ? html`<p>No batches yet.</p>`
              : html`<div class="table-wrap">
                  <table class="batches">
                    <thead>
                      <tr>
                        <th scope="col">Batch</th>
                        <th scope="col">Endpoint</th>
                        <th scope="col">Status</th>
                        <th scope="col">Progress</th>
                        <th scope="col">Created</th>
                        <th scope="col">Actions</th>
                      </tr>
                    </thead>
                    <tbody>
                      ${batches.map(
                        (b) => html`<tr data-batch-id=${b.id}>
                          <th scope="row"><code>${b.id}</code></th>
                          <td data-label="Endpoint"><code>${b.endpoint}</code></td>
                          <td data-label="Status" class="batch-status">
                            <span class=${`badge ${STATUS_BADGES[b.status] ?? ""}`}>${b.status}</span>
                            ${b.errors?.data?.length > 0 && html`<span class="hint"> ${b.errors.data[0].message}${b.errors.data.length > 1 ? ` (and ${b.errors.data.length - 1} more)` : ""}</span>`}
                          </td>
                          <td data-label="Progress"><${BatchProgress} batch=${b} /></td>
                          <td data-label="Created">${dateTime(isoOf(b.created_at))}</td>
                          <td data-label="Actions" class="actions">
                            ${
                              (b.status === "validating" || b.status === "in_progress") &&
                              html`<button type="button" class="danger" aria-label=${`Cancel ${b.id}`} onClick=${() => cancel(b)}>Cancel</button>`
                            }
                            ${
                              b.output_file_id &&
                              html`<button type="button" aria-label=${`Download output of ${b.id}`} onClick=${() => download(b, b.output_file_id, "output")}>Download output</button>`
                            }
                            ${
                              b.error_file_id &&
                              html`<button type="button" aria-label=${`Download errors of ${b.id}`} onClick=${() => download(b, b.error_file_id, "errors")}>Download errors</button>`
                            }
                          </td>
                        </tr>`,
                      )}
                    </tbody>
                  </table>
                </div>`
      }
    </section>
  `;
}
