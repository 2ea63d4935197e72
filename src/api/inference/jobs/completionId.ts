import { randomBytes } from "node:crypto";

const ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

/** A fresh completion id with the endpoint's usual prefix: chatcmpl-..., cmpl-..., embd-... (no ':' so it can be a BullMQ job id). */
export function newCompletionId(prefix: "chatcmpl" | "cmpl" | "embd"): string {
  const bytes = randomBytes(24);
  let id = "";
  for (const byte of bytes) id += ALPHABET[byte % ALPHABET.length];
  return `${prefix}-${id}`;
}
