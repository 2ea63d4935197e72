import { chromium, type Browser, type BrowserContext, type Page } from "playwright-core";

export const CHROMIUM_PATH = "/usr/bin/chromium";
/** The flags every browser test runs Debian's Chromium with. */
export const CHROMIUM_ARGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

export function launchChromium(): Promise<Browser> {
  return chromium.launch({ executablePath: CHROMIUM_PATH, args: CHROMIUM_ARGS, headless: true });
}

/**
 * Collects what a page must never do: script errors, console errors (CSP violations are reported there)
 * and requests to any origin other than the app's.
 */
export function watchPage(page: Page, origin: string): { problems: string[] } {
  const problems: string[] = [];
  page.on("pageerror", (error) => problems.push(`page error: ${error.message}`));
  page.on("console", (message) => {
    if (message.type() === "error") problems.push(`console error: ${message.text()}`);
  });
  page.on("request", (request) => {
    if (!request.url().startsWith(`${origin}/`)) problems.push(`request outside the app: ${request.url()}`);
  });
  return { problems };
}

export async function newContext(browser: Browser, origin: string): Promise<BrowserContext> {
  const context = await browser.newContext({ viewport: { width: 1200, height: 900 }, baseURL: origin });
  await context.grantPermissions(["clipboard-read", "clipboard-write"], { origin });
  return context;
}
