import { z } from "zod";

/** A surrogate code point: with the `u` flag only an unpaired surrogate is one. */
const LONE_SURROGATE = /\p{Cs}/u;

/**
 * PostgreSQL text and jsonb cannot hold U+0000, and an unpaired UTF-16 surrogate has no UTF-8 form: such
 * a string passes a plain z.string() and then fails inside the database (a 500). Every client-sent string
 * that is stored or used in a query goes through this refinement first, so it is a 400 naming the param.
 */
export function isStorableText(value: string): boolean {
  return !value.includes("\u0000") && !LONE_SURROGATE.test(value);
}

const LONE_SURROGATES = /\p{Cs}/gu;

/** The text with U+0000 and unpaired surrogates replaced by U+FFFD: what PostgreSQL can store of it. */
export function toStorableText(value: string): string {
  return isStorableText(value) ? value : value.replaceAll("\u0000", "\uFFFD").replace(LONE_SURROGATES, "\uFFFD");
}

export const STORABLE_TEXT_MESSAGE = "must not contain NUL characters (U+0000) or unpaired UTF-16 surrogates";

/** z.string() that PostgreSQL can store: chain further checks/transforms after it. */
export const storableString = () => z.string().refine(isStorableText, STORABLE_TEXT_MESSAGE);
