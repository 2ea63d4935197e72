/** The most a JSON request body may hold, checked on its bytes as they arrive, before it is parsed. */
export type JsonShapeLimits = {
  /** Nesting of objects and arrays (`{}` is depth 1). */
  maxDepth: number;
  /** Members of one object. */
  maxMembers: number;
  /** Values (objects, arrays, strings, numbers, literals) in the whole body, about. */
  maxValues: number;
};

/**
 * What any API body may hold. Far above a real request (a JSON Schema may nest 64 levels, inside a body
 * that nests a few; a chat request has a few values per message,
 * and its JSON Schemas at most 50,000 together; embeddings take at most 2048 strings; a JSON Schema with
 * more than a thousand properties in one object is no schema a model can follow), far below what stalls
 * the event loop: parsing and validating the most this allows takes a few tens of milliseconds, where an
 * unbounded 4 MiB body took a second.
 */
export const DEFAULT_JSON_SHAPE_LIMITS: JsonShapeLimits = { maxDepth: 128, maxMembers: 1000, maxValues: 100_000 };

const OPEN_OBJECT = 0x7b;
const CLOSE_OBJECT = 0x7d;
const OPEN_ARRAY = 0x5b;
const CLOSE_ARRAY = 0x5d;
const COMMA = 0x2c;
const QUOTE = 0x22;
const BACKSLASH = 0x5c;

/**
 * A byte scanner of a JSON text fed chunk by chunk: counts nesting, the members of each open object and
 * the values of the whole text (every container, plus one per comma), and names the first limit passed.
 * It checks no grammar (JSON.parse does, afterwards, on a text the limits have made cheap to parse).
 * UTF-8 multi-byte sequences never contain these ASCII bytes, so scanning bytes is exact. Constant work
 * per byte, memory bounded by maxDepth.
 */
export class JsonShapeScanner {
  readonly #limits: JsonShapeLimits;
  #inString = false;
  /** The previous chunk ended on an unpaired backslash inside a string. */
  #escaped = false;
  /** Per open container: -1 for an array, else the commas seen at that object's level. */
  readonly #open: number[] = [];
  #values = 1;
  #problem: string | null = null;

  constructor(limits: JsonShapeLimits = DEFAULT_JSON_SHAPE_LIMITS) {
    this.#limits = limits;
  }

  /** Scans the next chunk; the first limit the text passed so far, else null. */
  push(chunk: Buffer): string | null {
    if (this.#problem !== null) return this.#problem;
    const { maxDepth, maxMembers, maxValues } = this.#limits;
    const open = this.#open;
    const length = chunk.length;
    let values = this.#values;
    let i = 0;
    while (i < length) {
      if (this.#inString) {
        i = this.#skipString(chunk, i);
        continue;
      }
      const byte = chunk[i++]!;
      if (byte === QUOTE) {
        this.#inString = true;
      } else if (byte === COMMA) {
        values++;
        const top = open.length - 1;
        if (top >= 0 && open[top]! >= 0 && ++open[top]! >= maxMembers) {
          this.#problem = `an object in the request body has more than ${maxMembers} members.`;
          break;
        }
      } else if (byte === OPEN_OBJECT || byte === OPEN_ARRAY) {
        values++;
        if (open.length >= maxDepth) {
          this.#problem = `the request body is nested more than ${maxDepth} levels deep.`;
          break;
        }
        open.push(byte === OPEN_OBJECT ? 0 : -1);
      } else if (byte === CLOSE_OBJECT || byte === CLOSE_ARRAY) {
        open.pop();
      }
      if (values > maxValues) {
        this.#problem = `the request body holds more than ${maxValues} JSON values.`;
        break;
      }
    }
    this.#values = values;
    return this.#problem;
  }

  /**
   * Inside a string from `from`: jumps to the next quote (memchr, however long the string) and decides
   * whether it ends the string by the run of backslashes before it. Returns where to go on.
   */
  #skipString(chunk: Buffer, from: number): number {
    let i = from;
    if (this.#escaped) {
      this.#escaped = false;
      i++;
    }
    const quote = chunk.indexOf(QUOTE, i);
    const end = quote < 0 ? chunk.length : quote;
    let backslashes = 0;
    while (end - backslashes - 1 >= i && chunk[end - backslashes - 1] === BACKSLASH) backslashes++;
    const odd = backslashes % 2 === 1;
    if (quote < 0) {
      // The chunk ends inside the string; an odd run of backslashes escapes the next chunk's first byte.
      this.#escaped = odd;
      return chunk.length;
    }
    if (!odd) this.#inString = false;
    return quote + 1;
  }
}
