import { render } from "preact";
import { useCallback, useEffect, useState } from "preact/hooks";
import { createApi } from "./api.js";
import { AuthPage } from "./authPages.js";
import { html } from "./html.js";
import { AccountPage } from "./accountPage.js";
import { UsagePage } from "./usagePage.js";
import { ModelsPage } from "./modelsPage.js";
import { PlaygroundPage } from "./playgroundPage.js";
import { BatchesPage } from "./batchesPage.js";
import { ErrorMessage } from "./widgets.js";

const PAGES = [
  { path: "/account", title: "API keys", component: AccountPage },
  { path: "/usage", title: "Usage", component: UsagePage },
  { path: "/models", title: "Models", component: ModelsPage },
  { path: "/playground", title: "Playground", component: PlaygroundPage },
  { path: "/batches", title: "Batches", component: BatchesPage },
];
const PUBLIC_PATHS = ["/login", "/signup"];

function Header({ account, path, navigate, onLogout, logoutError }) {
  return html`
    <header class="top">
      <a class="skip" href="#main">Skip to content</a>
      <span class="brand">Inference Platform</span>
      <nav aria-label="Console">
        <ul>
          ${PAGES.map(
            (page) => html`<li>
              <a
                href=${page.path}
                aria-current=${path === page.path ? "page" : undefined}
                onClick=${(e) => {
                  e.preventDefault();
                  navigate(page.path);
                }}
                >${page.title}</a
              >
            </li>`,
          )}
        </ul>
      </nav>
      <span class="who">${account.email}</span>
      <button type="button" onClick=${onLogout}>Log out</button>
      <${ErrorMessage} error=${logoutError} />
    </header>
  `;
}

function App({ api }) {
  const [path, setPath] = useState(location.pathname);
  const [session, setSession] = useState(undefined); // undefined: not known yet; null: logged out
  const [logoutError, setLogoutError] = useState(null);
  // The session could not be read (the service unreachable or answering 503): not a logout.
  const [sessionError, setSessionError] = useState(null);
  // Why the login page is shown to someone who was logged in (the session ended meanwhile).
  const [authNotice, setAuthNotice] = useState("");
  // A key created in this page stays in memory (never stored) so the playground can use it.
  const [playgroundKey, setPlaygroundKey] = useState("");

  const navigate = useCallback((to) => {
    if (to !== location.pathname) history.pushState(null, "", to);
    setPath(to);
    setLogoutError(null);
    window.scrollTo(0, 0);
    // Screen readers and keyboards start on the new page's content, not on the link just used.
    setTimeout(() => document.getElementById("main")?.focus({ preventScroll: true }), 0);
  }, []);

  const loadSession = useCallback(async () => {
    try {
      const current = await api.get("/console/session");
      api.setCsrfToken(current.csrf_token);
      setSessionError(null);
      setSession(current);
    } catch (failure) {
      api.setCsrfToken(null);
      // Only a 401 means there is no session; anything else (503, no answer) leaves it unknown.
      if (failure?.status === 401) {
        setSessionError(null);
        setPlaygroundKey("");
        setSession(null);
      } else setSessionError(failure);
    }
  }, [api]);

  useEffect(() => {
    api.onSessionEnded((code) => {
      api.setCsrfToken(null);
      // The key belongs to the session that made it: whoever logs in next on this page must not use it.
      setPlaygroundKey("");
      setSession(null);
      setAuthNotice(
        code === "session_replaced"
          ? "Someone logged in to another account in this browser, which ended this page's session. Log in again."
          : "Your session has ended. Log in again.",
      );
    });
    loadSession();
    const onPop = () => setPath(location.pathname);
    window.addEventListener("popstate", onPop);
    return () => window.removeEventListener("popstate", onPop);
  }, [loadSession]);

  const page = PAGES.find((p) => p.path === path);
  useEffect(() => {
    if (session === undefined) return;
    if (!session && !PUBLIC_PATHS.includes(path)) navigate("/login");
    if (session && !page) navigate("/account");
  }, [session, path, page, navigate]);
  useEffect(() => {
    document.title = `${page ? page.title : path === "/signup" ? "Sign up" : "Log in"} · Inference Platform`;
  }, [page, path]);

  if (session === undefined && sessionError) {
    return html`<main class="auth" id="main">
      <h1>The console cannot reach the service</h1>
      <${ErrorMessage} error=${sessionError} />
      <button type="button" class="primary" onClick=${loadSession}>Try again</button>
    </main>`;
  }
  if (session === undefined) return html`<p class="loading">Loading the console…</p>`;
  if (!session) {
    return html`<${AuthPage}
      api=${api}
      mode=${path === "/signup" ? "signup" : "login"}
      navigate=${navigate}
      notice=${authNotice}
      onLoggedIn=${async (csrfToken) => {
        api.setCsrfToken(csrfToken);
        setAuthNotice("");
        await loadSession();
        navigate("/account");
      }}
    />`;
  }
  if (!page) return null;
  const logout = async () => {
    try {
      await api.del("/console/session");
    } catch (error) {
      // Not logged out (the server did not end the session: its cookie would open it again), unless the
      // session had ended already (401). The page stays logged in; the session is read again for a fresh
      // CSRF token, and dropped only if the server says it has ended (a failing read keeps it).
      if (error?.status !== 401) {
        const ended = await api.get("/console/session").then(
          (current) => {
            api.setCsrfToken(current.csrf_token);
            return false;
          },
          (failure) => failure?.status === 401,
        );
        if (!ended) {
          setLogoutError(new Error(`Logging out failed: ${error.message} You are still logged in; try again.`));
          return;
        }
      }
    }
    setLogoutError(null);
    api.setCsrfToken(null);
    setPlaygroundKey("");
    setSession(null);
    navigate("/login");
  };
  const Page = page.component;
  return html`
    <${Header} account=${session.account} path=${path} navigate=${navigate} onLogout=${logout} logoutError=${logoutError} />
    <main id="main" tabindex="-1">
      <${Page}
        api=${api}
        account=${session.account}
        navigate=${navigate}
        playgroundKey=${playgroundKey}
        setPlaygroundKey=${setPlaygroundKey}
      />
    </main>
  `;
}

render(html`<${App} api=${createApi()} />`, document.getElementById("app"));
