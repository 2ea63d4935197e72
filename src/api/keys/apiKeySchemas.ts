import { z } from "zod";
import { storableString } from "../http/storableText.ts";

/** Key names: 1 to 100 characters after trimming, stored trimmed. */
export const KeyNameSchema = storableString().trim().min(1, "the name must not be empty").max(100, "the name must be at most 100 characters");

export const CreateKeyBodySchema = z.object({ name: KeyNameSchema }).strict();
export type CreateKeyBody = z.infer<typeof CreateKeyBodySchema>;

export const RenameKeyBodySchema = z.object({ name: KeyNameSchema }).strict();
export type RenameKeyBody = z.infer<typeof RenameKeyBodySchema>;

/** A key id in a path: a uuid (anything else is answered 404 like an unknown id). */
export const KeyIdSchema = z.uuid().transform((id) => id.toLowerCase());
