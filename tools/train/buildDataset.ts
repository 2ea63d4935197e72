/**
 * Builds the training set of the built-in model from the extracted novels:
 *   npm exec -- node tools/train/buildDataset.ts BOOKS.json OUT_DIR
 * Learns the BPE vocabulary (2,048 tokens) with the project's own trainer, then writes
 * OUT_DIR/tokenizer.json, OUT_DIR/tokens.bin (uint16 LE token ids, every document starting with
 * BOS) and OUT_DIR/docs.bin (uint32 LE document start offsets).
 */
import { readFile, writeFile, mkdir } from "node:fs/promises";
import { join } from "node:path";
import { BpeTokenizer } from "../gguf/bpeTokenizer.ts";
import { trainBpe } from "../gguf/bpeTrainer.ts";
import { austenChat, renderChatML } from "./austenChat.ts";
import type { AustenBook } from "./austenChat.ts";

const VOCAB_SIZE = 2048;
const SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|pad|>"];
const PLAIN_DOC_TOKENS = 250;
const CHAT_EXCHANGES = 9000;

const [booksPath, outDir] = process.argv.slice(2);
if (booksPath === undefined || outDir === undefined) throw new Error("usage: buildDataset.ts BOOKS.json OUT_DIR");
const books = (JSON.parse(await readFile(booksPath, "utf8")) as { books: AustenBook[] }).books;
const paragraphs = books.flatMap((b) => b.chapters.flatMap((c) => c.paragraphs));
const exchanges = austenChat(books, CHAT_EXCHANGES, 2024);
const chatTexts = exchanges.map(renderChatML);

const t0 = performance.now();
const vocab = trainBpe([...paragraphs, ...chatTexts.map((t) => t.replaceAll(/<\|im_(start|end)\|>/g, "\n"))], {
  merges: VOCAB_SIZE - 256 - SPECIALS.length,
  specialTokens: SPECIALS,
  minFrequency: 2,
});
const tokenizer = new BpeTokenizer(vocab);
console.log(`vocab ${vocab.tokens.length} tokens, ${vocab.merges.length} merges in ${(performance.now() - t0).toFixed(0)} ms`);
const bos = tokenizer.tokenId("<|endoftext|>");

const docs: number[][] = [];
let plainTokens = 0;
for (const book of books) {
  for (const chapter of book.chapters) {
    let current: number[] = [];
    for (const paragraph of chapter.paragraphs) {
      const ids = tokenizer.encode(current.length === 0 ? paragraph : `\n\n${paragraph}`);
      if (current.length > 0 && current.length + ids.length > PLAIN_DOC_TOKENS) {
        docs.push([bos, ...current]);
        current = tokenizer.encode(paragraph);
      } else current.push(...ids);
    }
    if (current.length > 0) docs.push([bos, ...current]);
  }
}
plainTokens = docs.reduce((a, d) => a + d.length, 0);
const plainDocs = docs.length;
for (const text of chatTexts) docs.push([bos, ...tokenizer.encode(text, { special: true })]);
const total = docs.reduce((a, d) => a + d.length, 0);
console.log(`${plainDocs} plain documents (${plainTokens} tokens), ${docs.length - plainDocs} chat documents (${total - plainTokens} tokens)`);

const tokens = new Uint16Array(total);
const starts = new Uint32Array(docs.length);
let at = 0;
docs.forEach((doc, i) => {
  starts[i] = at;
  tokens.set(doc, at);
  at += doc.length;
});
await mkdir(outDir, { recursive: true });
await writeFile(join(outDir, "tokens.bin"), tokens);
await writeFile(join(outDir, "docs.bin"), starts);
await writeFile(
  join(outDir, "tokenizer.json"),
  JSON.stringify({
    ...vocab,
    bosId: bos,
    eosId: tokenizer.tokenId("<|im_end|>"),
    padId: tokenizer.tokenId("<|pad|>"),
    plainDocuments: plainDocs,
    sampleChat: chatTexts.slice(0, 3),
  }),
);
