import { useRef, useState } from "preact/hooks";
import { html } from "./html.js";
import { ErrorMessage } from "./widgets.js";

/** Log in (and sign up, which registers then logs in): the server sets the HttpOnly session cookie. */
export function AuthPage({ api, mode, navigate, onLoggedIn, notice }) {
  const signup = mode === "signup";
  const [email, setEmail] = useState("");
  const [password, setPassword] = useState("");
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  const passwordField = useRef(null);

  async function submit(event) {
    event.preventDefault();
    let failed = false;
    setBusy(true);
    setError(null);
    try {
      if (signup) await api.post("/api/v1/accounts/register", { email, password });
      const session = await api.post("/console/session", { email, password });
      await onLoggedIn(session.csrf_token);
    } catch (failure) {
      setError(failure);
      // Back to the password (the focused button was disabled while busy: focus had fallen to the page).
      failed = true;
    } finally {
      setBusy(false);
    }
    if (failed) setTimeout(() => passwordField.current?.focus(), 0);
  }

  const other = signup ? { path: "/login", text: "Already have an account? Log in" } : { path: "/signup", text: "New here? Create an account" };
  return html`
    <main class="auth" id="main">
      <h1>${signup ? "Create your account" : "Log in"}</h1>
      ${notice && html`<p class="notice" role="status">${notice}</p>`}
      <form onSubmit=${submit} class="card stack">
        <label for="email">Email address</label>
        <input id="email" name="email" type="email" autocomplete="email" required value=${email} onInput=${(e) => setEmail(e.currentTarget.value)} />
        <label for="password">Password</label>
        <input
          id="password"
          ref=${passwordField}
          name="password"
          type="password"
          autocomplete=${signup ? "new-password" : "current-password"}
          minlength=${signup ? 10 : undefined}
          aria-describedby=${signup ? "password-hint" : undefined}
          required
          value=${password}
          onInput=${(e) => setPassword(e.currentTarget.value)}
        />
        ${signup && html`<p id="password-hint" class="hint">At least 10 characters.</p>`}
        <${ErrorMessage} error=${error} />
        <button type="submit" class="primary" disabled=${busy}>${signup ? "Create account" : "Log in"}</button>
      </form>
      <p>
        <a
          href=${other.path}
          onClick=${(e) => {
            e.preventDefault();
            setError(null);
            navigate(other.path);
          }}
          >${other.text}</a
        >
      </p>
    </main>
  `;
}
