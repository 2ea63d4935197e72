/** How long a console call may go unanswered before it is given up with a message. */
const REQUEST_TIMEOUT_MS = 30_000;

/** A failed API call, carrying the OpenAI-shape error the server answered. */
export class ApiFailure extends Error {
  constructor(status, error) {
    super(error?.message ?? `The server answered HTTP ${status}.`);
    this.status = status;
    this.type = error?.type ?? null;
    this.code = error?.code ?? null;
  }
}

/**
 * The console's API client: same origin, the HttpOnly session cookie goes along by itself; the CSRF
 * token (answered at login, kept only in this page's memory) goes in a header on every call, so the
 * server can tell when the cookie is no longer this page's session (another login in the same browser:
 * 401 `session_replaced`), and on state-changing calls it is required.
 */
export function createApi() {
  const state = { csrfToken: null, onSessionEnded: () => undefined };
  async function request(method, path, body) {
    const headers = { accept: "application/json" };
    if (body !== undefined) headers["content-type"] = "application/json";
    if (state.csrfToken) headers["x-csrf-token"] = state.csrfToken;
    let response;
    try {
      response = await fetch(path, {
        method,
        headers,
        credentials: "same-origin",
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
      });
    } catch (failure) {
      // No answer at all: say what that means, not the browser's "Failed to fetch".
      throw new ApiFailure(
        0,
        failure?.name === "TimeoutError"
          ? { message: `The service did not answer within ${REQUEST_TIMEOUT_MS / 1000} s. Try again in a moment.` }
          : { message: "The service cannot be reached. Check your connection, then try again in a moment." },
      );
    }
    if (response.status === 204) return null;
    const data = await response.json().catch(() => null);
    if (!response.ok) {
      // The session ended while the console was open (logged out elsewhere, expired): back to the login page.
      if (response.status === 401 && state.csrfToken && !path.startsWith("/console/session")) state.onSessionEnded(data?.error?.code ?? null);
      throw new ApiFailure(response.status, data?.error);
    }
    return data;
  }
  return {
    request,
    setCsrfToken(token) {
      state.csrfToken = token;
    },
    /** What to do when a call finds the session ended (401), given the error's code (`session_replaced`: another login). */
    onSessionEnded(handler) {
      state.onSessionEnded = handler;
    },
    get: (path) => request("GET", path),
    post: (path, body) => request("POST", path, body),
    patch: (path, body) => request("PATCH", path, body),
    del: (path) => request("DELETE", path),
  };
}
