import { useEffect, useRef, useState } from "preact/hooks";
import { html } from "./html.js";
import { cancelChat, cancelResponse, streamChat, streamResponse } from "./chatStream.js";
import { ErrorMessage } from "./widgets.js";

/** The two APIs the playground can send through: how each streams and cancels. */
const APIS = {
  chat: { label: "Chat Completions", stream: streamChat, cancel: cancelChat },
  responses: { label: "Responses", stream: streamResponse, cancel: cancelResponse },
};

/**
 * Pick a model, send a chat message, watch the reply stream in (through the public API, with an API key:
 * POST /v1/chat/completions or POST /v1/responses, as chosen).
 */
export function PlaygroundPage({ api, playgroundKey, setPlaygroundKey, navigate }) {
  const [models, setModels] = useState([]);
  const [model, setModel] = useState("");
  const [apiName, setApiName] = useState("chat");
  const [message, setMessage] = useState("");
  const [turns, setTurns] = useState([]);
  const [streaming, setStreaming] = useState(null);
  const [error, setError] = useState(null);
  // What the status line says once a reply ended: how it ended (complete, stopped, or finished before Stop).
  const [ending, setEnding] = useState("");
  const abort = useRef(null);
  /** The running completion's id, the key it runs with, and whether Stop was pressed before the id was known. */
  const running = useRef({ completionId: null, stopped: false, cancel: cancelChat, apiKey: "" });

  useEffect(() => {
    api.get("/console/models").then((list) => {
      const chat = list.data.filter((m) => m.capabilities.includes("chat"));
      setModels(chat);
      setModel((current) => current || (chat.find((m) => m.available) ?? chat[0])?.id || "");
    }, setError);
    // Leaving the page (another section, or the tab closed) stops a running reply as Stop does: closing
    // the stream alone would let it run on (the service keeps a dropped stream's job for its client to
    // come back), charged for text nobody reads.
    const leave = () => {
      const current = running.current;
      if (abort.current && current.completionId && !current.stopped) {
        current.stopped = true;
        current.cancel({ apiKey: current.apiKey, completionId: current.completionId });
      }
      abort.current?.abort();
    };
    window.addEventListener("pagehide", leave);
    return () => {
      window.removeEventListener("pagehide", leave);
      leave();
    };
  }, [api]);

  async function send(event) {
    event.preventDefault();
    // One reply at a time: Ctrl+Enter submits the form past the disabled Send button (two streams wrote
    // into one reply, and the first one's end dropped the second turn, charged all the same).
    if (abort.current) return;
    const messages = [...turns, { role: "user", content: message }];
    setTurns(messages);
    setMessage("");
    setError(null);
    setStreaming("");
    abort.current = new AbortController();
    const chosen = APIS[apiName];
    setEnding("");
    running.current = { completionId: null, stopped: false, finishedFirst: false, cancel: chosen.cancel, apiKey: playgroundKey };
    const controller = abort.current;
    const onCompletionId = (completionId) => {
      running.current.completionId = completionId;
      if (running.current.stopped) cancelThenStop(chosen.cancel, completionId, controller);
    };
    let partial = "";
    const onText = (text) => {
      partial = text;
      setStreaming(text);
    };
    try {
      const reply = await chosen.stream({ apiKey: playgroundKey, model, messages, signal: abort.current.signal, onText, onCompletionId });
      setTurns([...messages, { role: "assistant", content: reply }]);
      setEnding(
        running.current.finishedFirst
          ? "The reply had already finished when Stop was pressed: it is shown whole, and was charged whole."
          : "The reply is complete.",
      );
    } catch (failure) {
      // Stopped: the stream aborted here, or ended by the cancel (chat's error event, a cancelled response).
      if (failure.name === "AbortError" || running.current.stopped) {
        // Stopped: keep what had arrived.
        setTurns(partial ? [...messages, { role: "assistant", content: partial }] : messages);
        setEnding("Stopped: the reply ends here; what the model had generated is charged.");
      } else if (partial) {
        // Cut off mid-reply (the connection broke, or the service ended it with an error): what arrived
        // stays, with what happened (it was dropped, the message put back and a bare "network error" shown).
        setTurns([...messages, { role: "assistant", content: partial }]);
        setError(cutOff(failure));
        setEnding("The reply was cut off before its end.");
      } else {
        // Nothing was answered: take the message back into the box, to send again once the cause is fixed.
        setError(failure);
        setTurns(turns);
        setMessage(messages.at(-1).content);
      }
    } finally {
      setStreaming(null);
      abort.current = null;
    }
  }

  /**
   * Cancels the job, then stops reading its stream, unless the cancel finds the reply already finished
   * (the model can be faster than the page): that one is read to its end and shown whole, as it was charged.
   */
  async function cancelThenStop(cancel, completionId, controller) {
    const { alreadyFinished, refused } = await cancel({ apiKey: playgroundKey, completionId });
    if (refused) {
      // Not stopped (the service could not take the cancel now): the reply is read on, as it runs on and
      // is charged; the page says so, and Stop can be pressed again (it said "Stopped" and closed the
      // stream, while the reply ran to its end and was charged whole).
      if (running.current.completionId === completionId) running.current.stopped = false;
      setError(refused);
      return;
    }
    if (alreadyFinished) running.current.finishedFirst = true;
    else controller?.abort();
  }

  /** Stop: the job is cancelled (not only the stream closed), so generation and its charge stop now. */
  function stop() {
    setError(null);
    running.current.stopped = true;
    if (running.current.completionId) {
      cancelThenStop(running.current.cancel, running.current.completionId, abort.current);
      return;
    }
    // The stream has not opened yet: its id (to cancel) comes with its headers; stop listening anyway soon.
    const pending = abort.current;
    setTimeout(() => pending?.abort(), 2_000);
  }

  return html`
    <h1>Playground</h1>
    <section class="card" aria-labelledby="playground-title">
      <h2 id="playground-title" class="visually-hidden">Chat</h2>
      <form class="stack" onSubmit=${send}>
        <div class="row">
          <div class="stack grow">
            <label for="pg-model">Model</label>
            <select id="pg-model" value=${model} onChange=${(e) => setModel(e.currentTarget.value)}>
              ${models.map((m) => html`<option value=${m.id}>${m.id}${m.available ? "" : " (no worker)"}</option>`)}
            </select>
          </div>
          <div class="stack grow">
            <label for="pg-api">API</label>
            <select id="pg-api" value=${apiName} disabled=${streaming !== null} onChange=${(e) => setApiName(e.currentTarget.value)}>
              ${Object.entries(APIS).map(([name, choice]) => html`<option value=${name}>${choice.label}</option>`)}
            </select>
          </div>
          <div class="stack grow">
            <label for="pg-key">API key</label>
            <input
              id="pg-key"
              type="password"
              autocomplete="off"
              required
              value=${playgroundKey}
              onInput=${(e) => setPlaygroundKey(e.currentTarget.value)}
              aria-describedby="pg-key-hint"
            />
          </div>
        </div>
        <p id="pg-key-hint" class="hint">
          The playground calls the API like any client, so it needs one of your keys. A key you created on the${" "}
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
        <ol class="chat" aria-label="Conversation">
          ${turns.map((t) => html`<li class=${`turn ${t.role}`}><span class="who-said">${t.role === "user" ? "You" : "Model"}</span>${t.content}</li>`)}
          ${streaming !== null && html`<li class="turn assistant streaming"><span class="who-said">Model</span><span id="pg-reply">${streaming}</span></li>`}
        </ol>
        <p role="status" class=${ending && streaming === null && ending !== "The reply is complete." ? "hint" : "visually-hidden"}>
          ${streaming !== null ? "The model is answering…" : turns.length ? ending : ""}
        </p>
        <${ErrorMessage} error=${error} />
        <label for="pg-message">Message</label>
        <textarea
          id="pg-message"
          rows="3"
          required
          value=${message}
          onInput=${(e) => setMessage(e.currentTarget.value)}
          onKeyDown=${(e) => {
            if (e.key === "Enter" && (e.ctrlKey || e.metaKey) && streaming === null) e.currentTarget.form.requestSubmit();
          }}
          aria-describedby="pg-message-hint"
        ></textarea>
        <p id="pg-message-hint" class="hint">Ctrl+Enter sends.</p>
        <div class="row">
          <button type="submit" class="primary" disabled=${streaming !== null || !model}>Send</button>
          ${streaming !== null && html`<button type="button" onClick=${stop}>Stop</button>`}
          <button type="button" onClick=${() => setTurns([])} disabled=${streaming !== null || turns.length === 0}>Clear conversation</button>
        </div>
      </form>
    </section>
  `;
}

/** Why a reply stopped short, in words a console user can act on (the browser says only "network error"). */
function cutOff(failure) {
  if (failure instanceof TypeError) {
    return new Error(
      "The reply was cut off before its end: the connection to the service broke. What arrived is kept above; the service may still finish it, and charges what the model generated. Send again to ask anew.",
    );
  }
  // The service ended it (cancelled elsewhere, the model failed): its own words, then what stays.
  const said = failure.message.replace(/[.\s]+$/, "");
  return new Error(
    `The reply was cut off before its end: ${said}. What arrived is kept above, and what the model generated is charged. Send again to ask anew.`,
  );
}
