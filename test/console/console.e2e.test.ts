import { mkdir, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { pathToFileURL } from "node:url";
import OpenAI from "openai";
import type { Browser, BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from "vitest";
import type { ProjectionRunner } from "../../projections/projectionRunner.ts";
import { BatchDispatcher } from "../../src/api/batches/batchDispatcher.ts";
import { startTestProjector } from "../support/testProjector.ts";
import { PASSWORD, newEmail } from "../accounts/accountSteps.ts";
import { launchChromium, newContext, watchPage } from "../support/browser.ts";
import { TEST_ADMIN_TOKEN } from "../support/testApp.ts";
import { pacedEngine } from "../inference/pacedEngine.ts";
import { startTestPlatform, TINY_CHAT, type TestPlatform } from "../support/testPlatform.ts";

// Functions passed to page.evaluate run in the browser: they reach its globals through `globalThis as any`
// (this TypeScript project has no DOM types).

/** `UPDATE_SCREENSHOTS=1` writes the README's screenshots into docs/; otherwise they go to a temp dir. */
const SCREENSHOTS =
  process.env.UPDATE_SCREENSHOTS === "1" ? new URL("../../docs/", import.meta.url) : pathToFileURL(`${tmpdir()}/console-screenshots-${process.pid}/`);

let platform: TestPlatform;
let paceMs = 0;
let runner: ProjectionRunner;
let dispatcher: BatchDispatcher;
let browser: Browser;
let context: BrowserContext;
let page: Page;
let watch: { problems: string[] };

beforeAll(async () => {
  // Unpaced, but for the Stop case: the tiny model may finish a reply before a click could stop it.
  platform = await startTestPlatform({
    wrapEngine: (_model, engine) => pacedEngine(engine, () => paceMs),
    env: { BATCH_POLL_MS: "50", BATCH_MAX_IN_FLIGHT: "4" },
  });
  runner = startTestProjector(platform);
  dispatcher = new BatchDispatcher(platform.deps, platform.inference, platform.deps.files!);
  dispatcher.start();
  browser = await launchChromium();
  context = await newContext(browser, platform.baseUrl);
  page = await context.newPage();
  watch = watchPage(page, platform.baseUrl);
  await mkdir(SCREENSHOTS, { recursive: true });
});
afterAll(async () => {
  await browser?.close();
  await runner?.stop();
  await dispatcher?.stop();
  await platform?.close();
  if (process.env.UPDATE_SCREENSHOTS !== "1") await rm(SCREENSHOTS, { recursive: true, force: true });
});

/** Saves a screenshot of the page, after checking that each of its form fields has a label. */
async function screenshot(name: string): Promise<void> {
  const unlabelled = await page.evaluate((): string[] =>
    [...(globalThis as any).document.querySelectorAll("input, select, textarea")]
      .filter((field: any) => field.labels.length === 0 && !field.getAttribute("aria-label"))
      .map((field: any) => field.outerHTML),
  );
  expect(unlabelled, name).toEqual([]);
  await page.screenshot({ path: new URL(name, SCREENSHOTS).pathname, fullPage: true });
}
const keyRow = (name: string) => page.locator("tr", { has: page.locator("td.key-name", { hasText: name }) });

/**
 * Clicks the keys section's Refresh until the row's request count reads `expected` (the projector has to
 * catch up) and its last use is shown (written in batches).
 */
async function waitForRequests(name: string, expected: string): Promise<void> {
  const until = Date.now() + 30_000;
  for (;;) {
    await page.getByRole("button", { name: "Refresh" }).click();
    await page.waitForLoadState("networkidle");
    const requests = await keyRow(name).locator("td.key-requests").textContent();
    const lastUsed = await keyRow(name).locator("td[data-label='Last used']").textContent();
    if (requests === expected && lastUsed !== "Never") return;
    if (Date.now() > until) throw new Error(`the key ${name} never showed ${expected} requests`);
    await page.waitForTimeout(250);
  }
}

describe("web console in Chromium against the real service (API, worker, projector)", () => {
  const email = newEmail("console");
  let fullKey = "";
  /** The last key created by the 5-key-limit walk (active). */
  let fullKeyOfNewest = "";

  it("signs up from /, shows the subscription as not active, then active once an operator activates it", async () => {
    await page.goto("/");
    await expect.poll(() => page.url()).toBe(`${platform.baseUrl}/login`);
    await page.getByRole("link", { name: /create an account/i }).click();
    await page.getByLabel("Email address").fill(email);
    await page.getByLabel("Password").fill(PASSWORD);
    await page.getByRole("button", { name: "Create account" }).click();
    await page.getByRole("heading", { name: "Account settings" }).waitFor();
    expect(page.url()).toBe(`${platform.baseUrl}/account`);
    expect(await page.locator("#subscription-status").textContent()).toBe("Not active");
    expect(await page.getByText("402 Payment Required").count()).toBe(1);
    // The usage page says so too (it showed a budget of CHF 0.00 without a word).
    await page.getByRole("link", { name: "Usage", exact: true }).click();
    await page.locator("#usage-inactive").waitFor();
    expect(await page.locator("#usage-inactive").textContent()).toContain("Your subscription is not active");
    await page.getByRole("link", { name: "API keys", exact: true }).click();
    await page.getByRole("heading", { name: "Account settings" }).waitFor();

    const cookies = await context.cookies();
    const session = cookies.find((c) => c.name === "console_session");
    expect(session).toMatchObject({ httpOnly: true, sameSite: "Strict", path: "/" });
    expect(await page.evaluate(() => (globalThis as any).document.cookie)).toBe("");

    // An operator activates the subscription (admin API), as in the operator walk-through.
    const found = await platform.request("GET", `/api/v1/admin/accounts?email=${encodeURIComponent(email)}`, { token: TEST_ADMIN_TOKEN });
    const activated = await platform.request("PUT", `/api/v1/admin/accounts/${found.body.id}/subscription`, {
      token: TEST_ADMIN_TOKEN,
      body: { status: "active", monthly_budget_chf: 20 },
    });
    expect(activated.status, activated.text).toBe(200);
    await page.reload();
    await page.locator("#subscription-status", { hasText: "Active" }).waitFor();
    expect(await page.getByText("Monthly budget CHF 20.00").count()).toBe(1);
  });

  it("creates a key, shows it once with a copy button, and the copied key works with the OpenAI SDK", async () => {
    await page.getByLabel("Key name").fill("laptop");
    await page.getByRole("button", { name: "Create key" }).click();
    const shown = page.locator("#new-key-value");
    await shown.waitFor();
    fullKey = await shown.inputValue();
    expect(fullKey).toMatch(/^sk-/);
    expect(await page.getByText("you will not see it again").count()).toBe(1);
    await page.getByRole("button", { name: "Copy", exact: true }).click();
    await page.getByRole("button", { name: "Copied" }).waitFor();
    const copied = await page.evaluate(() => (globalThis as any).navigator.clipboard.readText());
    expect(copied).toBe(fullKey);
    expect(await keyRow("laptop").locator("code").textContent()).toBe(`sk-${"*".repeat(16)}${fullKey.slice(-4)}`);
    await screenshot("console-keys.png");

    const reply = await platform.openai(copied).chat.completions.create({ model: TINY_CHAT, messages: [{ role: "user", content: "Hello" }], max_tokens: 8 });
    expect(reply.usage?.completion_tokens).toBeGreaterThan(0);

    await page.getByRole("button", { name: "I have saved it" }).click();
    expect(await page.locator("#new-key-value").count()).toBe(0);
    expect(await page.content()).not.toContain(fullKey);
  });

  it("counts the SDK request on the key once the projector has it, renames inline, and shows usage", async () => {
    await waitForRequests("laptop", "1");
    expect(await keyRow("laptop").locator("td[data-label='Cost']").textContent()).not.toBe("CHF 0.00");

    // By keyboard: the Rename button takes Enter, the field gets the focus, Enter saves.
    await page.getByRole("button", { name: "Rename laptop" }).focus();
    await page.keyboard.press("Enter");
    const input = page.getByLabel("New name for laptop");
    await expect.poll(() => input.evaluate((el) => el === (globalThis as any).document.activeElement)).toBe(true);
    await input.fill("laptop (old)");
    await input.press("Enter");
    await keyRow("laptop (old)").waitFor();
    // The focus stays on the row's actions (not the page's top): Rename again, then Escape.
    const focusedLabel = () => page.evaluate((): string | null => (globalThis as any).document.activeElement?.getAttribute("aria-label") ?? null);
    await expect.poll(focusedLabel).toBe("Rename laptop (old)");
    await page.keyboard.press("Enter");
    await page.getByLabel("New name for laptop (old)").press("Escape");
    await expect.poll(focusedLabel).toBe("Rename laptop (old)");
    const listed = await platform.request("GET", "/api/v1/accounts/user/api-keys", { headers: { cookie: await cookieHeader() } });
    expect(listed.body.data.map((k: { name: string }) => k.name)).toEqual(["laptop (old)"]);

    await page.getByRole("link", { name: "Usage" }).click();
    await page.getByRole("heading", { name: "Daily cost, last 30 days" }).waitFor();
    expect(await page.locator("#budget-spent").textContent()).not.toBe("CHF 0.00");
    await page.locator(".chart canvas").first().waitFor();
    const byKey = page.locator("section", { has: page.getByRole("heading", { name: "By key, this billing period" }) });
    expect(await byKey.locator("tbody tr th").allTextContents()).toEqual(["laptop (old)"]);
    expect(await byKey.locator("tbody tr td").first().textContent()).toBe("1");
    const byModel = page.locator("section", { has: page.getByRole("heading", { name: "By model, this billing period" }) });
    expect(await byModel.locator("tbody tr th").allTextContents()).toEqual([TINY_CHAT]);
    // No Batch API lines yet: the batch spend is zero and the interactive spend is all of it.
    expect(await page.locator("#batch-spend").textContent()).toMatch(/^CHF 0\.0+$/);
    expect(await page.locator("#interactive-spend").textContent()).toBe(await page.locator("#budget-spent").textContent());
    await screenshot("console-usage.png");

    await page.getByRole("link", { name: "Models" }).click();
    const row = page.locator("table.models tbody tr", { hasText: TINY_CHAT });
    await row.waitFor();
    expect(await row.locator("td[data-label='Context length']").textContent()).toBe("1,024 tokens");
    expect(await row.locator("td[data-label='Input']").textContent()).toBe("CHF 0.50");
    expect(await row.locator("td[data-label='Output']").textContent()).toBe("CHF 1.50");
    await screenshot("console-models.png");
  });

  it("streams a chat reply in the playground with the key created on this page", async () => {
    await page.getByRole("link", { name: "Playground" }).click();
    expect(await page.getByLabel("API key").inputValue()).toBe(fullKey);
    await expect.poll(() => page.getByLabel("Model").inputValue()).toBe(TINY_CHAT);
    // Record every text the reply shows while it streams.
    await page.evaluate(() => {
      const seen: string[] = [];
      (globalThis as any).replyStates = seen;
      new (globalThis as any).MutationObserver(() => {
        const text = (globalThis as any).document.getElementById("pg-reply")?.textContent;
        if (text && seen.at(-1) !== text) seen.push(text);
      }).observe((globalThis as any).document.body, { subtree: true, childList: true, characterData: true });
      // Keep a copy of the stream the page reads: Chromium may drop a streamed body from its
      // network buffer, so the test reads a tee of it in the page instead of asking the browser.
      const fetchOfPage = (globalThis as any).fetch.bind(globalThis);
      (globalThis as any).fetch = async (...args: unknown[]) => {
        const response = await fetchOfPage(...args);
        if (String(args[0]).endsWith("/v1/chat/completions")) {
          // A stream the page stops (Stop) rejects its copy too: not an error of the page's.
          (globalThis as any).streamText = response
            .clone()
            .text()
            .catch(() => "");
        }
        return response;
      };
    });
    await page.getByLabel("Message").fill("Tell me a story");
    const answer = page.waitForResponse((response) => response.url().endsWith("/v1/chat/completions"));
    await page.getByRole("button", { name: "Send" }).click();
    await page.getByText("The reply is complete.").waitFor({ state: "attached", timeout: 60_000 });
    const response = await answer;
    expect(response.headers()["content-type"]).toMatch(/^text\/event-stream/);
    // What the page showed is what the stream said, delta by delta (a short reply may arrive in one event).
    const events = ((await page.evaluate(() => (globalThis as any).streamText)) as string)
      .split("\n")
      .filter((line) => line.startsWith("data: "))
      .map((line) => line.slice(6));
    expect(events.at(-1)).toBe("[DONE]");
    const deltas = events.slice(0, -1).map((data) => (JSON.parse(data).choices[0]?.delta?.content as string | undefined) ?? "");
    const states = await page.evaluate((): string[] => (globalThis as any).replyStates);
    const final = await page.locator("li.turn.assistant").last().textContent();
    expect(states.length).toBeGreaterThan(0);
    expect(states.at(-1)).toBe(deltas.join(""));
    expect(final).toBe(`Model${states.at(-1)}`);
    // Every intermediate text shown is a prefix of the reply: it grew as the events came in.
    for (const shown of states) expect(deltas.join("").startsWith(shown)).toBe(true);
    await screenshot("console-playground.png");
  });

  it("Stop in the playground cancels the completion's job (POST .../cancel), not only the stream", async () => {
    paceMs = 300;
    onTestFinished(() => {
      paceMs = 0;
    });
    await page.getByLabel("Message").fill("Tell me another story");
    const answer = page.waitForResponse((response) => response.url().endsWith("/v1/chat/completions"));
    const cancel = page.waitForRequest((request) => request.method() === "POST" && /\/v1\/chat\/completions\/[^/]+\/cancel$/.test(request.url()));
    await page.getByRole("button", { name: "Send" }).click();
    // At once, before the reply can end (its id comes with the stream's headers: the page cancels then).
    // dispatchEvent, not click: no wait for the streaming text to stop moving the button.
    await page.getByRole("button", { name: "Stop" }).dispatchEvent("click", undefined, { timeout: 10_000 });
    const completionId = (await answer).headers()["x-completion-id"];
    expect(completionId).toMatch(/^chatcmpl-/);
    const request = await cancel;
    expect(request.url()).toBe(`${platform.baseUrl}/v1/chat/completions/${completionId}/cancel`);
    expect(request.headers().authorization).toBe(`Bearer ${fullKey}`);
    expect((await request.response())?.status()).toBe(200);
    // The job itself was cancelled (not only the page's stream closed): the stored completion says so.
    const stored = await platform.request("GET", `/v1/chat/completions/${completionId}`, { token: fullKey });
    expect(stored.status).toBe(200);
    expect(stored.headers.get("x-completion-status")).toBe("cancelled");
  });

  it("sends one reply at a time: Ctrl+Enter while a reply streams sends nothing (it started a second stream)", async () => {
    paceMs = 300;
    const posts: string[] = [];
    const onRequest = (request: { method(): string; url(): string }) => {
      if (request.method() === "POST" && request.url().endsWith("/v1/chat/completions")) posts.push(request.url());
    };
    page.on("request", onRequest);
    onTestFinished(() => {
      paceMs = 0;
      page.off("request", onRequest);
    });
    await page.getByLabel("Message").fill("Tell me a third story");
    await page.getByRole("button", { name: "Send" }).click();
    await page.getByRole("button", { name: "Stop" }).waitFor();
    await page.getByLabel("Message").fill("And a fourth");
    await page.getByLabel("Message").press("Control+Enter");
    await page.waitForTimeout(500);
    expect(posts).toHaveLength(1);
    await page.getByRole("button", { name: "Stop" }).dispatchEvent("click");
    await page.getByRole("button", { name: "Stop" }).waitFor({ state: "detached", timeout: 10_000 });
    await page.getByLabel("Message").fill("");
  });

  it("keeps what arrived, and says what happened, when a reply is cut off (the text was dropped and the message put back)", async () => {
    paceMs = 300;
    onTestFinished(() => {
      paceMs = 0;
    });
    const answer = page.waitForResponse((response) => response.url().endsWith("/v1/chat/completions"));
    await page.getByLabel("Message").fill("Tell me a fifth story");
    await page.getByRole("button", { name: "Send" }).click();
    const completionId = (await answer).headers()["x-completion-id"]!;
    await page.locator("#pg-reply").filter({ hasText: /\S/ }).waitFor();
    // Ended by the service, not by this page's Stop (here a cancel sent elsewhere): its stream's error event.
    expect((await platform.request("POST", `/v1/chat/completions/${completionId}/cancel`, { token: fullKey })).status).toBe(200);
    await expect
      .poll(async () => page.getByRole("alert").textContent(), { timeout: 10_000 })
      .toMatch(/^The reply was cut off before its end: .*cancelled.*\. What arrived is kept above, and what the model generated is charged\./);
    const kept = await page.locator("li.turn.assistant").last().textContent();
    expect(kept?.replace(/^Model/, "").trim().length).toBeGreaterThan(0);
    expect(await page.getByLabel("Message").inputValue()).toBe("");
  });

  it("says so when Stop's cancel is refused (the service could not take it), reads on, and a second Stop stops it", async () => {
    paceMs = 300;
    onTestFinished(() => {
      paceMs = 0;
    });
    // The service answers the first cancel 503 (as with Redis away): the page said "Stopped" and closed the
    // stream while the reply ran on and was charged whole.
    const cancelPattern = /\/v1\/chat\/completions\/[^/]+\/cancel$/;
    await page.route(cancelPattern, (route) =>
      route.fulfill({
        status: 503,
        contentType: "application/json",
        body: JSON.stringify({
          error: { message: "The job queue (Redis) is temporarily unavailable.", type: "service_unavailable", code: "redis_unavailable" },
        }),
      }),
    );
    onTestFinished(() => page.unroute(cancelPattern));
    await page.getByLabel("Message").fill("Tell me a story that goes on");
    const answer = page.waitForResponse((response) => response.url().endsWith("/v1/chat/completions"));
    await page.getByRole("button", { name: "Send" }).click();
    const completionId = (await answer).headers()["x-completion-id"]!;
    await page.locator("#pg-reply").filter({ hasText: /\S/ }).waitFor();
    await page.getByRole("button", { name: "Stop" }).dispatchEvent("click");
    await page.getByRole("alert").filter({ hasText: "could not stop it now (HTTP 503" }).waitFor();
    // Still reading: the reply grows, and Stop is there to press again.
    const shown = (await page.locator("#pg-reply").textContent()) ?? "";
    await page.waitForFunction((before) => ((globalThis as any).document.querySelector("#pg-reply")?.textContent ?? "").length > before.length, shown);
    await page.unroute(cancelPattern);
    const cancelled = page.waitForResponse((response) => cancelPattern.test(response.url()));
    await page.getByRole("button", { name: "Stop" }).dispatchEvent("click");
    expect((await cancelled).status()).toBe(200);
    await page.getByRole("status").filter({ hasText: "Stopped: the reply ends here" }).waitFor();
    expect(await page.getByRole("alert").count()).toBe(0);
    const stored = await platform.request("GET", `/v1/chat/completions/${completionId}`, { token: fullKey });
    expect(stored.headers.get("x-completion-status")).toBe("cancelled");
  });

  it("shows a reply whole, and says so, when Stop comes after the model had finished it (the page still reading it)", async () => {
    // The page's reading of the stream is held after its first text (as on a slow network) until Stop's cancel
    // has found the reply finished: the model is done at once.
    await page.evaluate(() => {
      const g = globalThis as any;
      const fetchBefore = g.fetch;
      g.fetch = async (...args: unknown[]) => {
        const response = await fetchBefore(...args);
        if (!g.holdStreamAfterFirstText || !String(args[0]).endsWith("/v1/chat/completions") || !response.body) return response;
        g.holdStreamAfterFirstText = false;
        let release!: () => void;
        const released = new Promise<void>((resolve) => {
          release = resolve;
        });
        g.releaseHeldStream = release;
        let text = "";
        let passed = false;
        const encoder = new g.TextEncoder();
        const held = response.body.pipeThrough(new g.TextDecoderStream()).pipeThrough(
          new g.TransformStream({
            async transform(chunk: string, controller: any) {
              if (passed) {
                await released;
                controller.enqueue(encoder.encode(chunk));
                return;
              }
              text += chunk;
              // Up to the end of the first event with text; the rest once released.
              const first = /"content":"[^"]+"[^\n]*\n\n/.exec(text);
              if (!first) return;
              passed = true;
              controller.enqueue(encoder.encode(text.slice(0, first.index + first[0].length)));
              const rest = text.slice(first.index + first[0].length);
              await released;
              if (rest) controller.enqueue(encoder.encode(rest));
            },
            async flush(controller: any) {
              await released;
              if (!passed && text) controller.enqueue(encoder.encode(text));
            },
          }),
        );
        return new g.Response(held, { status: response.status, headers: response.headers });
      };
      g.holdStreamAfterFirstText = true;
    });
    await page.getByLabel("Message").fill("Tell me one more story");
    const answer = page.waitForResponse((response) => response.url().endsWith("/v1/chat/completions"));
    await page.getByRole("button", { name: "Send" }).click();
    const completionId = (await answer).headers()["x-completion-id"]!;
    await page.locator("#pg-reply").filter({ hasText: /\S/ }).waitFor();
    // Answered once the reply ended (the model is not slowed down: within moments).
    const stored = await platform.request("GET", `/v1/chat/completions/${completionId}`, { token: fullKey });
    expect(stored.body.choices[0].finish_reason).toBe("stop");
    const cancelled = page.waitForResponse((response) => /\/cancel$/.test(response.url()));
    await page.getByRole("button", { name: "Stop" }).dispatchEvent("click");
    expect(await (await cancelled).json()).toMatchObject({ status: "completed" });
    await page.evaluate(() => (globalThis as any).releaseHeldStream());
    await page.getByRole("status").filter({ hasText: "The reply had already finished when Stop was pressed" }).waitFor();
    const whole = stored.body.choices[0].message.content as string;
    expect(await page.locator("li.turn.assistant").last().textContent()).toBe(`Model${whole}`);
  });

  it("streams a reply through the Responses API when chosen, and its Stop cancels the response (POST /v1/responses/{id}/cancel)", async () => {
    await page.getByLabel("API", { exact: true }).selectOption({ label: "Responses" });
    await page.evaluate(() => {
      (globalThis as any).replyStates = [];
      const fetchOfPage = (globalThis as any).fetch.bind(globalThis);
      (globalThis as any).fetch = async (...args: unknown[]) => {
        const response = await fetchOfPage(...args);
        if (String(args[0]).endsWith("/v1/responses")) {
          (globalThis as any).responsesText = response
            .clone()
            .text()
            .catch(() => "");
        }
        return response;
      };
    });
    await page.getByRole("button", { name: "Clear conversation" }).click();
    await page.getByLabel("Message").fill("Tell me a story");
    const answer = page.waitForResponse((response) => response.url().endsWith("/v1/responses"));
    await page.getByRole("button", { name: "Send" }).click();
    await page.getByText("The reply is complete.").waitFor({ state: "attached", timeout: 60_000 });
    const response = await answer;
    expect(response.request().method()).toBe("POST");
    expect(JSON.parse(response.request().postData() ?? "{}")).toMatchObject({ model: TINY_CHAT, stream: true });
    expect(response.headers()["content-type"]).toMatch(/^text\/event-stream/);
    // The page shows what the response's output_text deltas say, which is its final output_text.
    const raw = (await page.evaluate(() => (globalThis as any).responsesText)) as string;
    const events = raw
      .split("\n")
      .filter((line) => line.startsWith("data: "))
      .map((line) => JSON.parse(line.slice(6)) as { type: string; delta?: string; response?: { output: { content: { text: string }[] }[] } });
    expect(events.at(-1)!.type).toBe("response.completed");
    const text = events
      .filter((e) => e.type === "response.output_text.delta")
      .map((e) => e.delta)
      .join("");
    expect(text.length).toBeGreaterThan(0);
    expect(events.at(-1)!.response!.output[0]!.content[0]!.text).toBe(text);
    expect(await page.locator("li.turn.assistant").last().textContent()).toBe(`Model${text}`);

    paceMs = 300;
    onTestFinished(() => {
      paceMs = 0;
    });
    await page.getByLabel("Message").fill("Tell me another story");
    const streamed = page.waitForResponse((r) => r.url().endsWith("/v1/responses"));
    const cancel = page.waitForRequest((request) => request.method() === "POST" && /\/v1\/responses\/[^/]+\/cancel$/.test(request.url()));
    await page.getByRole("button", { name: "Send" }).click();
    await page.getByRole("button", { name: "Stop" }).dispatchEvent("click", undefined, { timeout: 10_000 });
    const responseId = (await streamed).headers()["x-completion-id"];
    expect(responseId).toMatch(/^resp_/);
    const request = await cancel;
    expect(request.url()).toBe(`${platform.baseUrl}/v1/responses/${responseId}/cancel`);
    expect(request.headers().authorization).toBe(`Bearer ${fullKey}`);
    expect((await request.response())?.status()).toBe(200);
    // The response itself was cancelled, not only the page's stream closed.
    const stored = await platform.request("GET", `/v1/responses/${responseId}`, { token: fullKey });
    expect(stored.status).toBe(200);
    expect(stored.body.status).toBe("cancelled");
    await page.getByRole("button", { name: "Send" }).waitFor();
    await page.getByLabel("API", { exact: true }).selectOption({ label: "Chat Completions" });
  });

  it("leaving the playground while a reply streams cancels its job, as Stop does", async () => {
    paceMs = 300;
    onTestFinished(() => {
      paceMs = 0;
    });
    await page.getByLabel("API", { exact: true }).selectOption({ label: "Chat Completions" });
    await page.getByLabel("Message").fill("Tell me a long story");
    const answer = page.waitForResponse((response) => response.url().endsWith("/v1/chat/completions"));
    const cancel = page.waitForRequest((request) => request.method() === "POST" && /\/v1\/chat\/completions\/[^/]+\/cancel$/.test(request.url()));
    await page.getByRole("button", { name: "Send" }).click();
    const completionId = (await answer).headers()["x-completion-id"];
    // The reply streams (its id is known): the user goes to another section of the console.
    await page.getByRole("link", { name: "Usage", exact: true }).click();
    const request = await cancel;
    expect(request.url()).toBe(`${platform.baseUrl}/v1/chat/completions/${completionId}/cancel`);
    expect((await request.response())?.status()).toBe(200);
    const stored = await platform.request("GET", `/v1/chat/completions/${completionId}`, { token: fullKey });
    expect(stored.headers.get("x-completion-status")).toBe("cancelled");
  });

  it("uploads a JSONL file on the Batches page, creates a batch, shows its progress to completed and downloads its output", async () => {
    await page.getByRole("link", { name: "Batches" }).click();
    await page.getByRole("heading", { name: "New batch" }).waitFor();
    expect(await page.getByLabel("API key").inputValue()).toBe(fullKey);
    const lines = ["alpha", "beta", "gamma"].map((name) =>
      JSON.stringify({
        custom_id: `console-${name}`,
        method: "POST",
        url: "/v1/chat/completions",
        body: { model: TINY_CHAT, messages: [{ role: "user", content: `Say ${name}` }], max_tokens: 4 },
      }),
    );
    await page
      .getByLabel("Input file (JSONL)")
      .setInputFiles({ name: "three.jsonl", mimeType: "application/jsonl", buffer: Buffer.from(`${lines.join("\n")}\n`) });
    expect(await page.getByLabel("Endpoint").inputValue()).toBe("/v1/chat/completions");
    const uploaded = page.waitForResponse((r) => r.url().endsWith("/v1/files") && r.request().method() === "POST");
    const created = page.waitForResponse((r) => r.url().endsWith("/v1/batches") && r.request().method() === "POST");
    await page.getByRole("button", { name: "Upload and create batch" }).click();
    const file = await (await uploaded).json();
    expect(file).toMatchObject({ object: "file", purpose: "batch", filename: "three.jsonl" });
    const batch = await (await created).json();
    expect(batch).toMatchObject({ object: "batch", input_file_id: file.id, endpoint: "/v1/chat/completions", completion_window: "24h" });
    await page
      .getByRole("status")
      .filter({ hasText: `Created ${batch.id}` })
      .waitFor();

    // The list (polled by the page) shows it through to completed, its progress bar full.
    const row = page.locator(`tr[data-batch-id="${batch.id}"]`);
    await row.locator(".batch-status .badge", { hasText: /^completed$/ }).waitFor({ timeout: 90_000 });
    const progress = row.getByRole("progressbar", { name: `Progress of ${batch.id}` });
    expect(await progress.getAttribute("aria-valuetext")).toBe("3 of 3 lines done (3 completed, 0 failed)");
    expect(await progress.evaluate((el: any) => [el.value, el.max])).toEqual([3, 3]);
    expect(await row.getByRole("button", { name: `Cancel ${batch.id}` }).count()).toBe(0);
    expect(await row.getByRole("button", { name: `Download errors of ${batch.id}` }).count()).toBe(0);
    await screenshot("console-batches.png");

    // The output file, fetched with the key and saved through a blob: URL.
    const downloading = page.waitForEvent("download");
    await row.getByRole("button", { name: `Download output of ${batch.id}` }).click();
    const download = await downloading;
    expect(download.suggestedFilename()).toBe(`${batch.id}_output.jsonl`);
    expect(download.url()).toMatch(/^blob:/);
    const output = (await readFile((await download.path())!, "utf8"))
      .split("\n")
      .filter(Boolean)
      .map((line) => JSON.parse(line) as { custom_id: string; response: { status_code: number } });
    expect(output.map((line) => line.custom_id).sort()).toEqual(["console-alpha", "console-beta", "console-gamma"]);
    for (const line of output) expect(line.response.status_code).toBe(200);
  });

  it("cancels a running batch from the Batches page (POST /v1/batches/{id}/cancel)", async () => {
    paceMs = 300;
    onTestFinished(() => {
      paceMs = 0;
    });
    const lines = Array.from({ length: 40 }, (_, i) =>
      JSON.stringify({
        custom_id: `slow-${i}`,
        method: "POST",
        url: "/v1/chat/completions",
        body: { model: TINY_CHAT, messages: [{ role: "user", content: "Hi" }], max_tokens: 8 },
      }),
    );
    await page.getByLabel("Input file (JSONL)").setInputFiles({ name: "slow.jsonl", mimeType: "application/jsonl", buffer: Buffer.from(lines.join("\n")) });
    const created = page.waitForResponse((r) => r.url().endsWith("/v1/batches") && r.request().method() === "POST");
    await page.getByRole("button", { name: "Upload and create batch" }).click();
    const batch = await (await created).json();
    const row = page.locator(`tr[data-batch-id="${batch.id}"]`);
    // Some lines done first: the cancelled batch then has both an output and an error file.
    await expect
      .poll(async () => (await platform.openai(fullKey).batches.retrieve(batch.id)).request_counts?.completed ?? 0, { timeout: 60_000 })
      .toBeGreaterThan(0);
    const cancel = page.waitForRequest((r) => r.method() === "POST" && r.url().endsWith(`/v1/batches/${batch.id}/cancel`));
    await row.getByRole("button", { name: `Cancel ${batch.id}` }).click();
    expect((await cancel).headers().authorization).toBe(`Bearer ${fullKey}`);
    await row.locator(".batch-status .badge", { hasText: /^cancelled$/ }).waitFor({ timeout: 90_000 });
    const stored = await platform.openai(fullKey).batches.retrieve(batch.id);
    expect(stored.status).toBe("cancelled");
    expect(stored.request_counts!.completed).toBeLessThan(40);
    // Its bar shows the lines completed, not the lines not run as if done.
    const { completed, failed } = stored.request_counts!;
    await row.getByText(`${completed} of 40 lines completed; ${failed} failed or not run (cancelled)`).waitFor();
    expect(await row.locator("progress").evaluate((bar) => (bar as unknown as { value: number }).value)).toBe(completed);
    // At phone width its card keeps both downloads within the screen (they wrap under the label).
    const desktop = page.viewportSize()!;
    await page.setViewportSize({ width: 390, height: 844 });
    try {
      await row.getByRole("button", { name: `Download errors of ${batch.id}` }).waitFor();
      const buttons = await row.getByRole("button").all();
      expect(buttons.length).toBeGreaterThan(1);
      for (const button of buttons) {
        const box = (await button.boundingBox())!;
        expect(box.x + box.width).toBeLessThanOrEqual(390);
      }
    } finally {
      await page.setViewportSize(desktop);
    }
  });

  it("revokes after a confirmation; the next SDK call is refused with 403", async () => {
    await page.getByRole("link", { name: "API keys", exact: true }).click();
    // Escape keeps the key, as a dialog closes; focus is back on its Revoke button.
    await page.getByRole("button", { name: "Revoke laptop (old)" }).click();
    await page.getByRole("alertdialog").waitFor();
    await page.keyboard.press("Escape");
    await page.getByRole("alertdialog").waitFor({ state: "detached" });
    await page.getByRole("button", { name: "Revoke laptop (old)" }).click();
    const confirm = page.getByRole("alertdialog");
    expect(await confirm.textContent()).toContain("cannot be undone");
    await confirm.getByRole("button", { name: "Revoke key" }).click();
    await keyRow("laptop (old)").locator(".badge", { hasText: "Revoked" }).waitFor();
    const error = await platform
      .openai(fullKey)
      .chat.completions.create({ model: TINY_CHAT, messages: [{ role: "user", content: "Hello" }], max_tokens: 8 })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OpenAI.PermissionDeniedError);
    expect((error as InstanceType<typeof OpenAI.APIError>).status).toBe(403);
  });

  it("works at phone width and logs out (the old cookie no longer opens a session)", async () => {
    const overflowing = () =>
      page.evaluate((): number => (globalThis as any).document.documentElement.scrollWidth - (globalThis as any).document.documentElement.clientWidth);
    // A key named with the longest name there is, without a space: it wraps, at any width.
    const longName = "x".repeat(100);
    await page.getByLabel("Key name").fill(longName);
    await page.getByRole("button", { name: "Create key" }).click();
    await page.getByRole("button", { name: "I have saved it" }).click();
    await keyRow(longName).waitFor();
    // The box and its button are gone: the focus is back in the name field, not on the page's top.
    await expect.poll(() => page.evaluate((): string | null => (globalThis as any).document.activeElement?.id ?? null)).toBe("new-key-name");
    expect(await overflowing()).toBeLessThanOrEqual(0);
    await page.setViewportSize({ width: 390, height: 844 });
    await page.reload();
    await keyRow("laptop (old)").waitFor();
    expect(await overflowing()).toBeLessThanOrEqual(0);
    // Every key's figures and buttons stay inside the page (its stacked card), the long one's too.
    const rightmost = await page.evaluate(() =>
      Math.max(...[...(globalThis as any).document.querySelectorAll("table.keys td")].map((cell: any) => cell.getBoundingClientRect().right)),
    );
    expect(rightmost).toBeLessThanOrEqual(390);
    await keyRow(longName).getByRole("button", { name: "Revoke" }).click();
    await keyRow(longName).getByRole("button", { name: "Revoke key" }).click();
    await keyRow(longName).getByText("Revoked").waitFor();
    // A revoked key has no buttons left: the focus is on its row.
    await expect.poll(() => page.evaluate((): boolean => (globalThis as any).document.activeElement?.tagName === "TR")).toBe(true);
    expect(await keyRow(longName).evaluate((row) => row === (globalThis as any).document.activeElement)).toBe(true);
    await screenshot("console-phone.png");
    // The Batches page (its file picker, the list of batches) fits the phone's width too.
    await page.getByRole("link", { name: "Batches" }).click();
    await page.getByLabel("Input file (JSONL)").waitFor();
    expect(await overflowing()).toBeLessThanOrEqual(0);
    // The Usage page's tables by key and by model are stacked cards too: every figure inside the page
    // (six columns of 769 px kept Completion tokens, Cost and batch off-screen in a scroller).
    await page.getByRole("link", { name: "Usage" }).click();
    await page.locator("table.usage td").first().waitFor();
    const usageRight = await page.evaluate(() =>
      Math.max(...[...(globalThis as any).document.querySelectorAll("table.usage td")].map((cell: any) => cell.getBoundingClientRect().right)),
    );
    expect(usageRight).toBeLessThanOrEqual(390);

    await page.getByRole("link", { name: "API keys", exact: true }).first().click();
    await keyRow("laptop (old)").waitFor();
    const oldCookie = await cookieHeader();
    // A log out the server did not do (it answered 503, and so does the session's read: PostgreSQL away):
    // the page says so and stays logged in.
    const failSession = (route: { request(): { method(): string }; fulfill(o: object): Promise<void>; continue(): Promise<void> }) =>
      route.fulfill({ status: 503, contentType: "application/json", body: JSON.stringify({ error: { message: "The database is unavailable." } }) });
    await page.route("**/console/session", failSession);
    await page.getByRole("button", { name: "Log out" }).click();
    await page.getByRole("alert").filter({ hasText: "Logging out failed" }).waitFor();
    expect(await page.getByRole("heading", { name: "Log in" }).count()).toBe(0);
    await page.unroute("**/console/session", failSession);
    await page.getByRole("button", { name: "Log out" }).click();
    await page.getByRole("heading", { name: "Log in" }).waitFor();
    expect((await context.cookies()).find((c) => c.name === "console_session")).toBeUndefined();
    expect((await platform.request("GET", "/console/session", { headers: { cookie: oldCookie } })).status).toBe(401);
    await page.setViewportSize({ width: 1200, height: 900 });
  });

  it("refuses a wrong password, then logs back in with the right one", async () => {
    await page.getByLabel("Email address").fill(email);
    await page.getByLabel("Password").fill("wrong password here");
    await page.getByRole("button", { name: "Log in" }).click();
    await page.getByRole("alert").filter({ hasText: "Incorrect email address or password." }).waitFor();
    // Focus is back on the password, to type it again (it had fallen to the page's body).
    await expect.poll(() => page.evaluate(() => (globalThis as any).document.activeElement?.id)).toBe("password");
    await page.getByLabel("Password").fill(PASSWORD);
    await page.getByRole("button", { name: "Log in" }).click();
    await keyRow("laptop (old)").waitFor();
  });

  it("sends the console to the login page, saying why, when its session ended elsewhere, and forgets the key it made", async () => {
    // A key made on this page is the playground's (kept in the page's memory): it belongs to this session.
    await page.getByLabel("Key name").fill("made before the session ended");
    await page.getByRole("button", { name: "Create key" }).click();
    const madeKey = await page.locator("#new-key-value").inputValue();
    await page.getByRole("button", { name: "I have saved it" }).click();
    await page.getByRole("link", { name: "Playground", exact: true }).click();
    expect(await page.getByLabel("API key").inputValue()).toBe(madeKey);
    await page.getByRole("link", { name: "API keys", exact: true }).click();
    await keyRow("made before the session ended").waitFor();
    const token = (await context.cookies()).find((c) => c.name === "console_session")!.value;
    expect((await platform.request("POST", "/api/v1/accounts/logout", { token })).status).toBe(204);
    await page.getByRole("link", { name: "Usage", exact: true }).click();
    await page.getByRole("heading", { name: "Log in" }).waitFor();
    await page.getByRole("status").filter({ hasText: "Your session has ended. Log in again." }).waitFor();
    await page.getByLabel("Email address").fill(email);
    await page.getByLabel("Password").fill(PASSWORD);
    await page.getByRole("button", { name: "Log in" }).click();
    // Whoever logs in next on this page (here the same account) does not find the ended session's key in use.
    await page.getByRole("link", { name: "Playground", exact: true }).click();
    expect(await page.getByLabel("API key").inputValue()).toBe("");
    await page.getByRole("link", { name: "API keys", exact: true }).click();
    await keyRow("laptop (old)").waitFor();
    // Revoked again: the 5-key walk below counts from the keys before this one.
    await page.getByRole("button", { name: "Revoke made before the session ended" }).click();
    await page.getByRole("alertdialog").getByRole("button", { name: "Revoke key" }).click();
    await keyRow("made before the session ended").getByText("Revoked").waitFor();
  });

  it("explains the 5-key limit where it bites: with 5 active keys, creating is off and the page says why", async () => {
    for (let i = 1; i <= 5; i++) {
      expect(await page.getByText("You have reached the limit").count()).toBe(0);
      await page.getByLabel("Key name").fill(`key ${i}`);
      await page.getByRole("button", { name: "Create key" }).click();
      fullKeyOfNewest = await page.locator("#new-key-value").inputValue();
      await page.getByRole("button", { name: "I have saved it" }).click();
    }
    await page.getByText("5 of 5 active keys in use. You have reached the limit: revoke a key").waitFor();
    expect(await page.getByRole("button", { name: "Create key" }).isDisabled()).toBe(true);
    // Revoking one makes room again.
    await page.getByRole("button", { name: "Revoke key 1" }).click();
    await page.getByRole("alertdialog").getByRole("button", { name: "Revoke key" }).click();
    await page.getByText("4 of 5 active keys in use.").waitFor();
    expect(await page.getByRole("button", { name: "Create key" }).isDisabled()).toBe(false);
  });

  it("refreshes a stale key count when the server refuses a 6th key made meanwhile in another tab", async () => {
    await page.getByText("4 of 5 active keys in use.").waitFor();
    const other = await context.newPage();
    await other.goto("/account");
    await other.getByLabel("Key name").fill("made in another tab");
    await other.getByRole("button", { name: "Create key" }).click();
    await other.getByRole("button", { name: "I have saved it" }).click();
    await other.close();
    // This tab still says 4 of 5: its Create is refused (400), and the list is read again.
    await page.getByLabel("Key name").fill("one too many");
    await page.getByRole("button", { name: "Create key" }).click();
    await page.getByText("5 of 5 active keys in use. You have reached the limit: revoke a key").waitFor();
    expect(await page.getByRole("button", { name: "Create key" }).isDisabled()).toBe(true);
    expect(await page.getByText("at most 5 active API keys").count()).toBe(1);
    await page.getByRole("button", { name: "Revoke made in another tab" }).click();
    await page.getByRole("alertdialog").getByRole("button", { name: "Revoke key" }).click();
    await page.getByText("4 of 5 active keys in use.").waitFor();
    // The list read again is current: the refusal's message is over.
    await page.getByRole("button", { name: "Refresh" }).click();
    await page.waitForLoadState("networkidle");
    expect(await page.getByText("at most 5 active API keys").count()).toBe(0);
  });

  it("sends a tab to the login page, never showing or writing the other account, when another account logs in in another tab", async () => {
    // A probe: the stale tab, still headed with the first account, listed the second's keys and created one in it.
    const otherEmail = newEmail("console-other");
    const other = await context.newPage();
    await other.goto("/account");
    await other.getByRole("button", { name: "Log out" }).click();
    await other.getByRole("heading", { name: "Log in" }).waitFor();
    await other.getByRole("link", { name: /create an account/i }).click();
    await other.getByLabel("Email address").fill(otherEmail);
    await other.getByLabel("Password").fill(PASSWORD);
    await other.getByRole("button", { name: "Create account" }).click();
    await other.getByRole("heading", { name: "Account settings" }).waitFor();
    await other.close();
    const keyReads: number[] = [];
    const onResponse = (response: { url(): string; status(): number }) => {
      if (response.url().endsWith("/api/v1/accounts/user/api-keys")) keyReads.push(response.status());
    };
    page.on("response", onResponse);
    await page.getByRole("button", { name: "Refresh" }).click();
    await page.getByRole("heading", { name: "Log in" }).waitFor();
    page.off("response", onResponse);
    expect(keyReads).toEqual([401]);
    await page.getByRole("status").filter({ hasText: "Someone logged in to another account in this browser" }).waitFor();
    await page.getByLabel("Email address").fill(email);
    await page.getByLabel("Password").fill(PASSWORD);
    await page.getByRole("button", { name: "Log in" }).click();
    await page.getByText("4 of 5 active keys in use.").waitFor();
    expect(await page.locator("span.who").textContent()).toBe(email);
  });

  it("says in the playground that a rate limit's 429 is a wait of moments, not the budget", async () => {
    const found = await platform.request("GET", `/api/v1/admin/accounts?email=${encodeURIComponent(email)}`, { token: TEST_ADMIN_TOKEN });
    const limit = (requestsPerMinute: number | null) =>
      platform.request("PUT", `/api/v1/admin/accounts/${found.body.id}/rate_limits`, {
        token: TEST_ADMIN_TOKEN,
        body: { requests_per_minute: requestsPerMinute },
      });
    expect((await limit(1)).status).toBe(200);
    try {
      await page.getByRole("link", { name: "Playground", exact: true }).click();
      await page.getByLabel("API key").fill(fullKeyOfNewest);
      await expect.poll(() => page.getByLabel("Model").inputValue()).toBe(TINY_CHAT);
      // The account's one request of the minute (maybe used already), then one over it.
      for (let i = 0; i < 2; i++) {
        await page.getByLabel("Message").fill("Hello again");
        await page.getByRole("button", { name: "Send" }).click();
        await page.waitForLoadState("networkidle");
      }
      const alert = page.getByRole("alert").filter({ hasText: "Too many requests for now (429)" });
      await alert.waitFor();
      expect(await alert.textContent()).not.toContain("budget");
    } finally {
      await limit(null);
    }
  });

  it("says in the playground what a 402 means once the subscription is cancelled, and keeps the message to send again", async () => {
    const found = await platform.request("GET", `/api/v1/admin/accounts?email=${encodeURIComponent(email)}`, { token: TEST_ADMIN_TOKEN });
    await platform.request("PUT", `/api/v1/admin/accounts/${found.body.id}/subscription`, { token: TEST_ADMIN_TOKEN, body: { status: "inactive" } });
    await page.getByRole("link", { name: "Playground", exact: true }).click();
    await page.getByLabel("API key").fill(fullKeyOfNewest);
    await expect.poll(() => page.getByLabel("Model").inputValue()).toBe(TINY_CHAT);
    // The turns of the playground so far (the rate limit's walk may have left an answered one).
    const turns = await page.locator("li.turn").count();
    await page.getByLabel("Message").fill("Are you there?");
    await page.getByRole("button", { name: "Send" }).click();
    await page.getByRole("alert").filter({ hasText: "no active subscription" }).waitFor();
    expect(await page.getByLabel("Message").inputValue()).toBe("Are you there?");
    expect(await page.locator("li.turn").count()).toBe(turns);
  });

  it("had no script error, no CSP violation and no request outside the app's origin in all of the above", () => {
    // The browser logs the answers the walk expected: 401 (no session yet, wrong password, a session
    // replaced), the 400 of a 6th key, the 429 of the rate limit, the 402 and the 503 of the log out made to fail.
    const expected = /^console error: Failed to load resource: the server responded with a status of (40[012]|429|503) /;
    expect(watch.problems.filter((p) => !expected.test(p))).toEqual([]);
    expect(watch.problems.length).toBeGreaterThan(0);
  });
});

async function cookieHeader(): Promise<string> {
  const session = (await context.cookies()).find((c) => c.name === "console_session");
  return `console_session=${session?.value ?? ""}`;
}
