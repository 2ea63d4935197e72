/**
 * GBNF expressions (inline, no rules of their own) for JSON values node-llama-cpp's JSON-schema grammar
 * cannot express: string formats and bounded numbers. Each writes a conservative form of its value, one
 * that the format's usual checkers accept (JSON Schema validators such as ajv, and the patterns zod writes
 * beside a format), e.g. a lowercase UUID with a version and variant, dates with days 01 to 28.
 */
const label = "[A-Za-z0-9] ([A-Za-z0-9-]{0,10} [A-Za-z0-9])?";
const count = "[0-9]{1,4}";
const quoted = (body: string): string => `"\\"" ${body} "\\""`;
const date = `[0-9]{4} "-" ("0" [1-9] | "1" [0-2]) "-" ("0" [1-9] | "1" [0-9] | "2" [0-8])`;

const FORMAT_BODIES: Record<string, string> = {
  email: `[A-Za-z0-9_+-]{1,16} ("." [A-Za-z0-9_+-]{1,16})? "@" (${label} "."){1,2} [A-Za-z]{2,8}`,
  uuid: `[0-9a-f]{8} "-" [0-9a-f]{4} "-" [1-8] [0-9a-f]{3} "-" [89ab] [0-9a-f]{3} "-" [0-9a-f]{12}`,
  uri: `"http" "s"? "://" (${label} "."){1,2} [a-z]{2,8} ("/" [A-Za-z0-9._~-]{1,16}){0,2}`,
  hostname: `${label} ("." ${label}){0,2}`,
  ipv4: `(${octet()} "."){3} ${octet()}`,
  ipv6: `[0-9a-f]{1,4} (":" [0-9a-f]{1,4}){7}`,
  duration: `"P" (${count} "W" | (${count} "Y" (${count} "M")? (${count} "D")? | ${count} "M" (${count} "D")? | ${count} "D") ("T" ${durationTime()})? | "T" ${durationTime()})`,
  date,
  "date-time": `${date} "T" ([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9] ":" [0-5] [0-9] "Z"`,
};

function octet(): string {
  return `("25" [0-5] | "2" [0-4] [0-9] | "1" [0-9] [0-9] | [1-9] [0-9] | [0-9])`;
}

function durationTime(): string {
  return `(${count} "H" (${count} "M")? (${count} "S")? | ${count} "M" (${count} "S")? | ${count} "S")`;
}

/** The quoted string of a format, or null when no grammar of it is known here. */
export function formatGrammar(format: string): string | null {
  const body = FORMAT_BODIES[format];
  return body === undefined ? null : quoted(body);
}

/**
 * The integers from low to high (low <= high, both within ±999,999,999,999,999): a negative part
 * (`"-"` and magnitudes) and a non-negative part, each split into runs of equal digit count. With
 * `fraction`, a number: also values with up to 6 decimals that lie between two integers of the range.
 */
export function rangeGrammar(low: number, high: number, fraction: boolean): string {
  const options: string[] = [];
  if (low < 0) options.push(`"-" ${naturalRange(Math.max(1, -high), -low)}`);
  if (high >= 0) options.push(naturalRange(Math.max(0, low), high));
  if (fraction) {
    const decimals = `"." [0-9]{1,6}`;
    // n.ddd lies in (n, n+1): within range for n from max(low, 0) to high - 1.
    if (high - 1 >= Math.max(low, 0)) options.push(`${naturalRange(Math.max(low, 0), high - 1)} ${decimals}`);
    // -k.ddd lies in (-(k+1), -k]: within range for k from max(0, -high) to -low - 1.
    if (-low - 1 >= Math.max(0, -high)) options.push(`"-" ${naturalRange(Math.max(0, -high), -low - 1)} ${decimals}`);
  }
  return `(${options.join(" | ")})`;
}

/** The non-negative integers from low to high, without leading zeros. */
function naturalRange(low: number, high: number): string {
  return `(${splitRange(low, high)
    .map(([start, stop]) => digitsBetween(String(start), String(stop)))
    .join(" | ")})`;
}

/** [low, high] as runs [start, stop] of equal digit count where each digit varies over a range independently. */
function splitRange(low: number, high: number): Array<[number, number]> {
  const stops = new Set<number>([high]);
  for (let nines = 1, stop = fillByNines(low, nines); low <= stop && stop < high; nines += 1, stop = fillByNines(low, nines)) stops.add(stop);
  for (let zeros = 1, stop = fillByZeros(high + 1, zeros) - 1; low < stop && stop <= high; zeros += 1, stop = fillByZeros(high + 1, zeros) - 1) stops.add(stop);
  const runs: Array<[number, number]> = [];
  let start = low;
  for (const stop of [...stops].sort((a, b) => a - b)) {
    runs.push([start, stop]);
    start = stop + 1;
  }
  return runs;
}

function fillByNines(value: number, nines: number): number {
  const text = String(value);
  if (nines >= text.length) return Number("9".repeat(nines));
  return Number(text.slice(0, text.length - nines) + "9".repeat(nines));
}

function fillByZeros(value: number, zeros: number): number {
  const unit = 10 ** zeros;
  return value - (value % unit);
}

function digitsBetween(start: string, stop: string): string {
  const parts: string[] = [];
  let anyDigits = 0;
  const flush = (): void => {
    if (anyDigits > 0) parts.push(anyDigits === 1 ? "[0-9]" : `[0-9]{${anyDigits}}`);
    anyDigits = 0;
  };
  for (let index = 0; index < start.length; index += 1) {
    const a = start[index]!;
    const b = stop[index]!;
    if (a === "0" && b === "9") {
      anyDigits += 1;
      continue;
    }
    flush();
    parts.push(a === b ? `"${a}"` : `[${a}-${b}]`);
  }
  flush();
  return parts.join(" ");
}
