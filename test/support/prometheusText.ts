/** One sample of a Prometheus text exposition. */
export type Sample = { name: string; labels: Record<string, string>; value: number };

const SAMPLE_LINE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)(?: \d+)?$/;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;

/** The samples of a Prometheus text exposition (format 0.0.4); comments skipped. Throws on a line it cannot read. */
export function parsePrometheusText(text: string): Sample[] {
  const samples: Sample[] = [];
  for (const line of text.split("\n")) {
    if (line === "" || line.startsWith("#")) continue;
    const match = SAMPLE_LINE.exec(line);
    if (!match) throw new Error(`not a Prometheus sample line: ${line}`);
    const labels: Record<string, string> = {};
    for (const [, name, value] of (match[2] ?? "").matchAll(LABEL)) labels[name!] = value!.replace(/\\(.)/g, (_, c: string) => (c === "n" ? "\n" : c));
    samples.push({ name: match[1]!, labels, value: Number(match[3]) });
  }
  return samples;
}

/**
 * The value of the sample `name` whose labels include `labels`, summed over the samples that match
 * (so a partial label set adds up every series it covers); undefined when none matches.
 */
export function sampleValue(samples: Sample[], name: string, labels: Record<string, string> = {}): number | undefined {
  const matching = samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
  return matching.length ? matching.reduce((sum, s) => sum + s.value, 0) : undefined;
}

/** Fetches and parses a /metrics endpoint. */
export async function scrape(url: string): Promise<{ status: number; contentType: string | null; samples: Sample[]; text: string }> {
  const response = await fetch(url);
  const text = await response.text();
  return { status: response.status, contentType: response.headers.get("content-type"), samples: response.ok ? parsePrometheusText(text) : [], text };
}
