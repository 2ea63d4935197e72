import { SeededRandom } from "../gguf/seededRandom.ts";

export type AustenBook = { title: string; chapters: { heading: string; paragraphs: string[] }[] };

export type ChatTurn = { user: string; assistant: string };
export type ChatExchange = { system: string | null; turns: ChatTurn[] };

const SYSTEM_PROMPTS = [
  "You are a helpful assistant.",
  "You are a test.",
  "You are a helpful assistant who writes like Jane Austen.",
  "Answer briefly.",
  "You are a literary assistant.",
];

const CHARACTERS = [
  "Elizabeth",
  "Darcy",
  "Jane",
  "Bingley",
  "Wickham",
  "Lydia",
  "Mr. Collins",
  "Mrs. Bennet",
  "Emma",
  "Mr. Knightley",
  "Harriet",
  "Mr. Elton",
  "Frank Churchill",
  "Miss Bates",
  "Elinor",
  "Marianne",
  "Willoughby",
  "Colonel Brandon",
  "Edward",
  "Fanny",
  "Edmund",
  "Sir Thomas",
  "Mrs. Norris",
  "Henry Crawford",
  "Mary Crawford",
  "Catherine",
  "Mr. Tilney",
  "Isabella",
  "General Tilney",
  "Anne",
  "Captain Wentworth",
  "Sir Walter",
  "Lady Russell",
  "Louisa",
];

const OPEN_REQUESTS = [
  "Write a sentence in the style of Jane Austen.",
  "Say something.",
  "Tell me a story.",
  "Hello!",
  "Write something.",
  "Give me a line from a novel.",
  "Tell me something about the family.",
];

const SENTENCE_END = /(?<=[.!?]["']?)\s+(?=["']?[A-Z])(?<!\b(?:Mr|Mrs|Dr|St|Messrs|Col)\.\s+)/;

export function splitSentences(paragraph: string): string[] {
  return paragraph
    .split(SENTENCE_END)
    .map((s) => s.trim())
    .filter((s) => s.length > 0);
}

function pick<T>(rng: SeededRandom, items: readonly T[]): T {
  return items[Math.floor(rng.next() * items.length)]!;
}

function takeSentences(sentences: string[], start: number, maxSentences: number, maxChars: number): string {
  let out = "";
  for (let i = start; i < sentences.length && i < start + maxSentences; i += 1) {
    const next = out === "" ? sentences[i]! : `${out} ${sentences[i]}`;
    if (out !== "" && next.length > maxChars) break;
    out = next;
  }
  return out;
}

/**
 * Builds ChatML exchanges from the novels: continue a passage, quote a chapter opening, say
 * something about a character, write in Austen's style, who wrote which novel.
 */
export function austenChat(books: AustenBook[], count: number, seed: number): ChatExchange[] {
  const rng = new SeededRandom(seed);
  const paragraphs: { title: string; sentences: string[] }[] = [];
  const byCharacter = new Map<string, string[]>(CHARACTERS.map((c) => [c, []]));
  for (const book of books) {
    for (const chapter of book.chapters) {
      for (const paragraph of chapter.paragraphs) {
        const sentences = splitSentences(paragraph);
        paragraphs.push({ title: book.title, sentences });
        for (const sentence of sentences) {
          if (sentence.length > 300) continue;
          for (const name of CHARACTERS) if (sentence.includes(name)) byCharacter.get(name)!.push(sentence);
        }
      }
    }
  }
  const multi = paragraphs.filter((p) => p.sentences.length >= 2);
  const shortSentences = paragraphs.flatMap((p) => p.sentences).filter((s) => s.length >= 20 && s.length <= 200);

  const turn = (): ChatTurn => {
    const kind = rng.next();
    if (kind < 0.4) {
      const p = pick(rng, multi);
      const cut = 1 + Math.floor(rng.next() * Math.min(2, p.sentences.length - 1));
      const prompt = takeSentences(p.sentences, 0, cut, 300);
      const answer = takeSentences(p.sentences, cut, 1 + Math.floor(rng.next() * 2), 350);
      const wording = pick(rng, [`Continue this passage from ${p.title}: "${prompt}"`, `Continue: ${prompt}`, `What comes next? ${prompt}`]);
      return { user: wording, assistant: answer };
    }
    if (kind < 0.55) {
      const book = pick(rng, books);
      const index = Math.floor(rng.next() * book.chapters.length);
      const chapter = book.chapters[index]!;
      const sentences = splitSentences(chapter.paragraphs[0] ?? "");
      return {
        user: `Quote the opening of chapter ${index + 1} of ${book.title}.`,
        assistant: takeSentences(sentences, 0, 2, 350),
      };
    }
    if (kind < 0.75) {
      const name = pick(rng, CHARACTERS);
      const pool = byCharacter.get(name)!;
      if (pool.length > 0) {
        const wording = pick(rng, [`Tell me about ${name}.`, `What do you know of ${name}?`, `Say something about ${name}.`]);
        return { user: wording, assistant: pick(rng, pool) };
      }
    }
    if (kind < 0.8) {
      const book = pick(rng, books);
      const answer = pick(rng, [`${book.title} was written by Jane Austen.`, `Jane Austen wrote ${book.title}.`, `It was written by Jane Austen.`]);
      return { user: pick(rng, [`Who wrote ${book.title}?`, `Who is the author of ${book.title}?`]), assistant: answer };
    }
    const sentence = pick(rng, shortSentences);
    return { user: pick(rng, OPEN_REQUESTS), assistant: sentence };
  };

  const exchanges: ChatExchange[] = [];
  for (let i = 0; i < count; i += 1) {
    const system = rng.next() < 0.3 ? null : pick(rng, SYSTEM_PROMPTS);
    const turns = [turn()];
    if (rng.next() < 0.2) turns.push(turn());
    exchanges.push({ system, turns: turns.filter((t) => t.assistant.length > 0) });
  }
  return exchanges.filter((e) => e.turns.length > 0);
}

/** Renders an exchange exactly as node-llama-cpp's ChatML wrapper does (without the BOS token). */
export function renderChatML(exchange: ChatExchange): string {
  let out = exchange.system === null ? "" : `<|im_start|>system\n${exchange.system}<|im_end|>\n`;
  for (const t of exchange.turns) {
    out += `<|im_start|>user\n${t.user}<|im_end|>\n<|im_start|>assistant\n${t.assistant}<|im_end|>\n`;
  }
  return out;
}
