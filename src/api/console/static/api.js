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
 * token (answered at login, kept only in this page's memory) goes in a header on state-changing calls.
 */
export function createApi() {
  const state = { csrfToken: null };
  async function request(method, path, body) {
    const headers = { accept: "application/json" };
    if (body !== undefined) headers["content-type"] = "application/json";
    if (method !== "GET" && state.csrfToken) headers["x-csrf-token"] = state.csrfToken;
    const response = await fetch(path, {
      method,
      headers,
      credentials: "same-origin",
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    if (response.status === 204) return null;
    const data = await response.json().catch(() => null);
    if (!response.ok) throw new ApiFailure(response.status, data?.error);
    return data;
  }
  return {
    request,
    setCsrfToken(token) {
      state.csrfToken = token;
    },
    get: (path) => request("GET", path),
    post: (path, body) => request("POST", path, body),
    patch: (path, body) => request("PATCH", path, body),
    del: (path) => request("DELETE", path),
  };
}
