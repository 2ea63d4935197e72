/**
 * A command refused by the domain (the ledger knows nothing of HTTP). The API maps `kind` to a status:
 * invalid -> 400 invalid_request_error, not_found -> 404; the operator CLI prints the message.
 */
export class DomainError extends Error {
  readonly kind: "invalid" | "not_found";
  readonly code: string;
  readonly param: string | null;
  constructor(kind: DomainError["kind"], message: string, options: { code: string; param?: string | null }) {
    super(message);
    this.name = new.target.name;
    this.kind = kind;
    this.code = options.code;
    this.param = options.param ?? null;
  }
}

export class AccountNotFoundError extends DomainError {
  constructor() {
    super("not_found", "No such account.", { code: "account_not_found" });
  }
}

export class KeyNotFoundError extends DomainError {
  constructor(keyId: string) {
    super("not_found", `No API key with id '${keyId}'.`, { code: "api_key_not_found", param: "key_id" });
  }
}
