import { z } from "zod";
import { storableString } from "../http/storableText.ts";

/** An email address, trimmed and lower-cased (rm_accounts.email is unique on that form). */
export const EmailSchema = storableString().trim().max(254, "must be at most 254 characters").toLowerCase().pipe(z.email("must be a valid email address"));

export const MIN_PASSWORD_LENGTH = 10;
/** Upper bound only to cap the hashing work a request can ask for. */
export const MAX_PASSWORD_LENGTH = 1024;

/**
 * A new password. NUL and unpaired surrogates are refused: scrypt would hash "x\u0000" as "x" (HMAC's
 * zero padding) and every unpaired surrogate as U+FFFD (UTF-8), so another password would open the account.
 */
export const NewPasswordSchema = storableString()
  .min(MIN_PASSWORD_LENGTH, `must be at least ${MIN_PASSWORD_LENGTH} characters`)
  .max(MAX_PASSWORD_LENGTH, `must be at most ${MAX_PASSWORD_LENGTH} characters`);

export const RegisterBodySchema = z.object({ email: EmailSchema, password: NewPasswordSchema }).strict();
export type RegisterBody = z.infer<typeof RegisterBodySchema>;

/**
 * Login checks only the types and sizes: a malformed email or a short password is simply wrong
 * credentials (401), never a hint about which accounts exist.
 */
export const LoginBodySchema = z
  .object({
    email: storableString().trim().toLowerCase().max(254, "must be at most 254 characters"),
    password: z.string().max(MAX_PASSWORD_LENGTH, `must be at most ${MAX_PASSWORD_LENGTH} characters`),
  })
  .strict();
export type LoginBody = z.infer<typeof LoginBodySchema>;

/** Account ids are UUIDs, lower-cased (the stream id `account-<id>` uses that form). */
export const AccountIdSchema = z.string().toLowerCase().pipe(z.uuid("must be an account id (a UUID)"));
