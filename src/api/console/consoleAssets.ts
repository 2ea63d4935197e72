import { createHash } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

/** One file the console serves, read once when the router is built. */
export type ConsoleAsset = { body: Buffer; contentType: string; etag: string };

const STATIC_DIR = fileURLToPath(new URL("./static/", import.meta.url));

const CONTENT_TYPES: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".svg": "image/svg+xml",
  ".png": "image/png",
};

/** The browser modules the console imports, served from the installed packages (no bundler, no CDN). */
const VENDOR_MODULES: Record<string, string> = {
  "preact.js": "preact",
  "preact-hooks.js": "preact/hooks",
  "htm.js": "htm",
};

function asset(body: Buffer, file: string): ConsoleAsset {
  const contentType = CONTENT_TYPES[path.extname(file)];
  if (!contentType) throw new Error(`console asset of unknown type: ${file}`);
  return { body, contentType, etag: `"${createHash("sha256").update(body).digest("base64url").slice(0, 27)}"` };
}

/** The module file a package specifier resolves to in this installation, e.g. preact -> .../preact.module.js. */
function resolvedFile(specifier: string): string {
  return fileURLToPath(import.meta.resolve(specifier));
}

export type ConsoleAssets = {
  /** URL path (e.g. /console/app/main.js) -> file. */
  files: Map<string, ConsoleAsset>;
  /** The single page every console URL answers with. */
  page: ConsoleAsset;
  /** The page's Content-Security-Policy: self only, plus the hash of its inline import map. */
  contentSecurityPolicy: string;
};

/** Reads the console's files: static/ (the app) and the vendored browser modules. */
export function loadConsoleAssets(): ConsoleAssets {
  const files = new Map<string, ConsoleAsset>();
  for (const entry of readdirSync(STATIC_DIR, { withFileTypes: true })) {
    // Unit tests of the browser modules sit beside them and are not served.
    if (!entry.isFile() || entry.name === "index.html" || entry.name.endsWith(".test.ts")) continue;
    files.set(`/console/app/${entry.name}`, asset(readFileSync(path.join(STATIC_DIR, entry.name)), entry.name));
  }
  for (const [name, specifier] of Object.entries(VENDOR_MODULES)) {
    const file = resolvedFile(specifier);
    files.set(`/console/vendor/${name}`, asset(readFileSync(file), name));
  }
  // uPlot's package resolves to its CommonJS build under Node's conditions; its ES module and CSS sit beside it.
  const uplotDir = path.dirname(resolvedFile("uplot"));
  files.set("/console/vendor/uplot.js", asset(readFileSync(path.join(uplotDir, "uPlot.esm.js")), "uplot.js"));
  files.set("/console/vendor/uplot.css", asset(readFileSync(path.join(uplotDir, "uPlot.min.css")), "uplot.css"));

  const html = readFileSync(path.join(STATIC_DIR, "index.html"));
  const importMap = /<script type="importmap">([\s\S]*?)<\/script>/.exec(html.toString("utf8"))?.[1];
  if (importMap === undefined) throw new Error("console index.html has no import map");
  const importMapHash = createHash("sha256").update(importMap).digest("base64");
  const contentSecurityPolicy = [
    "default-src 'none'",
    `script-src 'self' 'sha256-${importMapHash}'`,
    "style-src 'self'",
    "img-src 'self' data:",
    "font-src 'self'",
    "connect-src 'self'",
    "base-uri 'none'",
    "form-action 'self'",
    "frame-ancestors 'none'",
  ].join("; ");
  return { files, page: asset(html, "index.html"), contentSecurityPolicy };
}
