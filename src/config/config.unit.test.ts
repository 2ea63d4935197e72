import { describe, expect, it } from "vitest";
import { ConfigError, loadConfig } from "./config.ts";

describe("loadConfig: limits, proxies and CORS", () => {
  it("defaults: CORS for any origin on /v1 and none on /api, no trusted proxy (the socket address), OWASP-sized sign-in limits", () => {
    const config = loadConfig({});
    expect(config.cors).toEqual({ v1: "*", api: [] });
    expect(config.trustProxyHops).toBe(0);
    expect(config.maxRequestBodyBytes).toBe(4 * 1024 * 1024);
    expect(config.rateLimits.loginPerAccountAddress).toEqual({ points: 10, durationSeconds: 900 });
    expect(config.rateLimits.registrationsPerAddress).toEqual({ points: 10, durationSeconds: 3600 });
    expect(config.passwordHashing).toEqual({ concurrency: 1, maxWaiting: 8 });
  });

  it("reads origin lists, 'none' and '*'", () => {
    const config = loadConfig({ CORS_V1_ORIGINS: "none", CORS_API_ORIGINS: " https://a.example.com, http://localhost:5173 " });
    expect(config.cors).toEqual({ v1: [], api: ["https://a.example.com", "http://localhost:5173"] });
    expect(loadConfig({ CORS_API_ORIGINS: "https://a.example.com,*" }).cors.api).toBe("*");
  });

  it.each([["https://a.example.com/"], ["a.example.com"], ["https://a.example.com/path"]])("refuses %s as an origin", (origin) => {
    expect(() => loadConfig({ CORS_API_ORIGINS: origin })).toThrow(ConfigError);
  });

  it("refuses a zero limit", () => {
    expect(() => loadConfig({ LOGIN_ATTEMPTS_PER_ADDRESS: "0" })).toThrow(/LOGIN_ATTEMPTS_PER_ADDRESS/);
  });
});
