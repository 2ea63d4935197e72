import Router from "@koa/router";
import { describe, expect, it } from "vitest";
import { RouteTemplates, routeTemplate, UNMATCHED_ROUTE } from "./routeTemplate.ts";

const noop = () => undefined;

function routers(): Router[] {
  const guard = new Router();
  guard.all("/v1{/*rest}", noop);
  const inference = new Router();
  inference.post("/v1/chat/completions", noop);
  inference.get("/v1/chat/completions/:completionId", noop);
  const keys = new Router({ prefix: "/api/v1/accounts/user/api-keys" });
  keys.get("/", noop);
  keys.get("/:keyId", noop);
  keys.post("/create", noop);
  return [guard, inference, keys];
}

describe("routeTemplate", () => {
  it("names the route template, with its router's prefix, never the raw path", () => {
    const all = routers();
    expect(routeTemplate(all, "POST", "/v1/chat/completions")).toBe("/v1/chat/completions");
    expect(routeTemplate(all, "GET", "/v1/chat/completions/chatcmpl-123")).toBe("/v1/chat/completions/:completionId");
    expect(routeTemplate(all, "GET", "/api/v1/accounts/user/api-keys/0b6c3f0e-0000-4000-8000-000000000000")).toBe("/api/v1/accounts/user/api-keys/:keyId");
    expect(routeTemplate(all, "POST", "/api/v1/accounts/user/api-keys/create")).toBe("/api/v1/accounts/user/api-keys/create");
    expect(routeTemplate(all, "HEAD", "/api/v1/accounts/user/api-keys/x")).toBe("/api/v1/accounts/user/api-keys/:keyId");
  });

  it("is 'unmatched' for a path only a catch-all guard or nothing matches, or a method no route has", () => {
    const all = routers();
    expect(routeTemplate(all, "GET", "/v1/whatever/sk-secret")).toBe(UNMATCHED_ROUTE);
    expect(routeTemplate(all, "GET", "/no/such/path")).toBe(UNMATCHED_ROUTE);
    expect(routeTemplate(all, "DELETE", "/v1/chat/completions")).toBe(UNMATCHED_ROUTE);
    expect(routeTemplate(all, "GET", "/%E0%A4%A")).toBe(UNMATCHED_ROUTE);
  });
});

describe("RouteTemplates", () => {
  it("answers as routeTemplate, asked again (remembered) or not, each method apart", () => {
    const routes = new RouteTemplates(routers());
    for (let round = 0; round < 2; round++) {
      expect(routes.of("POST", "/v1/chat/completions")).toBe("/v1/chat/completions");
      expect(routes.of("DELETE", "/v1/chat/completions")).toBe(UNMATCHED_ROUTE);
      expect(routes.of("GET", "/v1/chat/completions/chatcmpl-123")).toBe("/v1/chat/completions/:completionId");
      expect(routes.of("GET", "/v1/whatever/sk-secret")).toBe(UNMATCHED_ROUTE);
    }
  });

  it("keeps answering right past its memory's bound and for long paths", () => {
    const routes = new RouteTemplates(routers());
    for (let i = 0; i < 600; i++) expect(routes.of("GET", `/v1/chat/completions/chatcmpl-${i}`)).toBe("/v1/chat/completions/:completionId");
    expect(routes.of("GET", `/v1/chat/completions/${"x".repeat(500)}`)).toBe("/v1/chat/completions/:completionId");
    expect(routes.of("POST", "/v1/chat/completions")).toBe("/v1/chat/completions");
  });
});
