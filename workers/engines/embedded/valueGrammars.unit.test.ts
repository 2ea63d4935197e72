import { describe, expect, it } from "vitest";
import { z } from "zod";
import { formatGrammar, rangeGrammar } from "./valueGrammars.ts";

/** The GBNF subset valueGrammars writes, read back: literals, classes, groups, alternatives, ? and {m,n}. */
type Node =
  | { kind: "literal"; text: string }
  | { kind: "class"; source: string }
  | { kind: "seq"; items: Node[] }
  | { kind: "or"; options: Node[] }
  | { kind: "repeat"; node: Node; min: number; max: number };

function parseGbnf(source: string): Node {
  let at = 0;
  const skip = (): void => {
    while (source[at] === " ") at += 1;
  };
  function alternatives(): Node {
    const options = [sequence()];
    skip();
    while (source[at] === "|") {
      at += 1;
      options.push(sequence());
      skip();
    }
    return options.length === 1 ? options[0]! : { kind: "or", options };
  }
  function sequence(): Node {
    const items: Node[] = [];
    for (skip(); at < source.length && source[at] !== "|" && source[at] !== ")"; skip()) items.push(postfix(atom()));
    return { kind: "seq", items };
  }
  function atom(): Node {
    const char = source[at];
    if (char === '"') {
      let text = "";
      for (at += 1; source[at] !== '"'; at += 1) text += source[at] === "\\" ? source[++at] : source[at];
      at += 1;
      return { kind: "literal", text };
    }
    if (char === "[") {
      const end = source.indexOf("]", at);
      const node: Node = { kind: "class", source: source.slice(at, end + 1) };
      at = end + 1;
      return node;
    }
    if (char === "(") {
      at += 1;
      const inner = alternatives();
      at += 1; // )
      return inner;
    }
    throw new Error(`unexpected ${char} at ${at} in ${source}`);
  }
  function postfix(node: Node): Node {
    if (source[at] === "?") {
      at += 1;
      return { kind: "repeat", node, min: 0, max: 1 };
    }
    if (source[at] === "{") {
      const end = source.indexOf("}", at);
      const [min, max] = source.slice(at + 1, end).split(",");
      at = end + 1;
      return { kind: "repeat", node, min: Number(min), max: Number(max ?? min) };
    }
    return node;
  }
  return alternatives();
}

function toRegex(node: Node): string {
  switch (node.kind) {
    case "literal":
      return node.text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
    case "class":
      return node.source;
    case "seq":
      return node.items.map(toRegex).join("");
    case "or":
      return `(?:${node.options.map(toRegex).join("|")})`;
    case "repeat":
      return `(?:${toRegex(node.node)}){${node.min},${node.max}}`;
  }
}

function sample(node: Node, random: () => number): string {
  const pick = (n: number): number => Math.floor(random() * n);
  switch (node.kind) {
    case "literal":
      return node.text;
    case "class": {
      const chars: string[] = [];
      const body = node.source.slice(1, -1);
      for (let index = 0; index < body.length; index += 1) {
        if (body[index + 1] === "-" && index + 2 < body.length) {
          for (let code = body.charCodeAt(index); code <= body.charCodeAt(index + 2); code += 1) chars.push(String.fromCharCode(code));
          index += 2;
        } else chars.push(body[index]!);
      }
      return chars[pick(chars.length)]!;
    }
    case "seq":
      return node.items.map((item) => sample(item, random)).join("");
    case "or":
      return sample(node.options[pick(node.options.length)]!, random);
    case "repeat":
      return Array.from({ length: node.min + pick(node.max - node.min + 1) }, () => sample(node.node, random)).join("");
  }
}

function seeded(seed: number): () => number {
  let state = seed;
  return () => {
    state = (state * 1_103_515_245 + 12_345) % 2 ** 31;
    return state / 2 ** 31;
  };
}

describe("rangeGrammar", () => {
  it.each([
    [0, 120],
    [1, 9],
    [5, 15],
    [-37, 12],
    [-1000, -3],
    [0, 0],
    [99, 1001],
    [-5, 5],
  ])("integers from %i to %i, exactly", (low, high) => {
    const regex = new RegExp(`^${toRegex(parseGbnf(rangeGrammar(low, high, false)))}$`);
    for (let n = low - 200; n <= high + 200; n += 1) expect(regex.test(String(n)), String(n)).toBe(n >= low && n <= high);
    expect(regex.test("007")).toBe(false);
  });

  it.each([
    [0, 1],
    [-3, 120],
    [-10, -2],
  ])("numbers from %i to %i: every written value is within the bounds", (low, high) => {
    const node = parseGbnf(rangeGrammar(low, high, true));
    const random = seeded(7);
    for (let i = 0; i < 2000; i += 1) {
      const value = Number(sample(node, random));
      expect(value).toBeGreaterThanOrEqual(low);
      expect(value).toBeLessThanOrEqual(high);
    }
  });

  it("bounds up to 15 digits", () => {
    const regex = new RegExp(`^${toRegex(parseGbnf(rangeGrammar(-999_999_999_999_999, 999_999_999_999_999, false)))}$`);
    expect(regex.test("999999999999999")).toBe(true);
    expect(regex.test("-123456789012345")).toBe(true);
    expect(regex.test("1000000000000000")).toBe(false);
  });
});

describe("formatGrammar: every string it writes passes zod's check of the format", () => {
  it.each([
    ["email", z.email()],
    ["uuid", z.uuid()],
    ["uri", z.url()],
    ["hostname", z.string().regex(/^(?=.{1,253}\.?$)[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[-0-9a-z]{0,61}[0-9a-z])?)*\.?$/i)],
    ["ipv4", z.ipv4()],
    ["ipv6", z.ipv6()],
    ["duration", z.iso.duration()],
    ["date", z.iso.date()],
    ["date-time", z.iso.datetime()],
  ])("%s", (format, check) => {
    const grammar = formatGrammar(format);
    expect(grammar).not.toBeNull();
    const node = parseGbnf(grammar!);
    const random = seeded(11);
    for (let i = 0; i < 500; i += 1) {
      const json = sample(node, random);
      const value = JSON.parse(json) as string;
      expect(check.safeParse(value).success, value).toBe(true);
    }
  });

  it("knows no grammar of other formats", () => {
    expect(formatGrammar("regex")).toBeNull();
  });
});
