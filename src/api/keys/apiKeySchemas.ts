import { z } from "zod";
import { storableString } from "../http/storableText.ts";

/** Key names: 1 to 100 characters after trimming, stored trimmed. */
/** Characters that show nothing on their own: spaces, zero-width and other format characters, controls. */
const INVISIBLE = /[\p{Z}\p{Cf}\p{Cc}\s]/gu;
/** Control characters, and the bidirectional overrides and isolates that make a name read as another (U+202E "gnp.exe"). */
const MISLEADING = /[\p{Cc}\u202A-\u202E\u2066-\u2069]/u;

export const KeyNameSchema = storableString()
  .trim()
  .min(1, "the name must not be empty")
  .max(100, "the name must be at most 100 characters")
  .refine((name) => name.replace(INVISIBLE, "") !== "", "the name must not be empty (it has no visible character)")
  .refine((name) => !MISLEADING.test(name), "the name must not contain control characters or bidirectional overrides");

export const CreateKeyBodySchema = z.object({ name: KeyNameSchema }).strict();
export type CreateKeyBody = z.infer<typeof CreateKeyBodySchema>;

export const RenameKeyBodySchema = z.object({ name: KeyNameSchema }).strict();
export type RenameKeyBody = z.infer<typeof RenameKeyBodySchema>;

/** A key id in a path: a uuid (anything else is answered 404 like an unknown id). */
export const KeyIdSchema = z.uuid().transform((id) => id.toLowerCase());
