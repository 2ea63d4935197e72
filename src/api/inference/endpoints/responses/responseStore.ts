import type { Pool } from "../../../../db/createPool.ts";
import { storableJson } from "../../../http/jsonValueCheck.ts";
import { isStorableText } from "../../../http/storableText.ts";
import type { StoredItem } from "./responseItems.ts";
import type { ResponseHead, ResponseState, ResponseStatus } from "./responseObject.ts";
import type { ResponseSettings } from "./toResponseChatRequest.ts";

/** A stored response: its head, its state, and its items (context before it, its own input). */
export type StoredResponse = ResponseHead & {
  accountId: string;
  state: ResponseState;
  contextItems: StoredItem[];
  inputItems: StoredItem[];
};

type Row = {
  id: string;
  account_id: string;
  model: string;
  status: ResponseStatus;
  background: boolean;
  settings: ResponseSettings;
  context_items: StoredItem[];
  input_items: StoredItem[];
  output_items: StoredItem[];
  usage: ResponseState["usage"];
  error: ResponseState["error"];
  incomplete_details: ResponseState["incomplete_details"];
  created_at: Date;
  completed_at: Date | null;
};

const seconds = (date: Date) => Math.floor(date.getTime() / 1000);

function fromRow(row: Row): StoredResponse {
  return {
    id: row.id,
    accountId: row.account_id,
    model: row.model,
    background: row.background,
    settings: row.settings,
    created_at: seconds(row.created_at),
    contextItems: row.context_items,
    inputItems: row.input_items,
    state: {
      status: row.status,
      output: row.output_items,
      usage: row.usage,
      error: row.error,
      incomplete_details: row.incomplete_details,
      completed_at: row.completed_at ? seconds(row.completed_at) : null,
    },
  };
}

/**
 * The `responses` table (migration 062): a stored response's settings, items and result, its owner's
 * data, deleted for real on DELETE or once it expires. `follow_until` is the lease of the API process
 * that follows its job to write the result.
 */
export class ResponseStore {
  readonly #pool: Pool;
  readonly #retentionMs: number;
  readonly #leaseMs: number;

  constructor(pool: Pool, options: { retentionMs: number; leaseMs: number }) {
    this.#pool = pool;
    this.#retentionMs = options.retentionMs;
    this.#leaseMs = options.leaseMs;
  }

  async create(response: StoredResponse, now: Date): Promise<void> {
    await this.#pool.query(
      `INSERT INTO responses (id, account_id, model, status, background, settings, context_items, input_items, created_at, expires_at, follow_until)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
      [
        response.id,
        response.accountId,
        response.model,
        response.state.status,
        response.background,
        JSON.stringify(response.settings),
        JSON.stringify(response.contextItems),
        JSON.stringify(response.inputItems),
        new Date(response.created_at * 1000),
        new Date(now.getTime() + this.#retentionMs),
        new Date(now.getTime() + this.#leaseMs),
      ],
    );
  }

  /** The account's response (null: none, another account's, deleted or expired). */
  async find(accountId: string, id: string): Promise<StoredResponse | null> {
    // An id no response can have (a client's `%00`): none, without a statement PostgreSQL would refuse.
    if (!isStorableText(id)) return null;
    const { rows } = await this.#pool.query<Row>("SELECT * FROM responses WHERE id = $1 AND account_id = $2 AND expires_at > now()", [id, accountId]);
    return rows[0] ? fromRow(rows[0]) : null;
  }

  /**
   * The account's stored items with these ids, from the input and output of its responses (migration
   * 075 indexes their ids); an id found in several responses is the newest one's.
   */
  async findItems(accountId: string, requested: string[]): Promise<Map<string, StoredItem>> {
    const ids = requested.filter(isStorableText);
    if (ids.length === 0) return new Map();
    const { rows } = await this.#pool.query<{ item: StoredItem }>(
      `SELECT DISTINCT ON (item->>'id') item
         FROM responses r, jsonb_array_elements(r.input_items || r.output_items) AS item
        WHERE r.account_id = $1 AND r.expires_at > now()
          AND (jsonb_path_query_array(r.output_items, '$[*].id') ?| $2::text[] OR jsonb_path_query_array(r.input_items, '$[*].id') ?| $2::text[])
          AND item->>'id' = ANY($2::text[])
        ORDER BY item->>'id', r.created_at DESC`,
      [accountId, ids],
    );
    return new Map(rows.map((row) => [row.item.id, row.item]));
  }

  /** The job started (a queued response is in progress). */
  async started(id: string): Promise<void> {
    await this.#pool.query("UPDATE responses SET status = 'in_progress' WHERE id = $1 AND status = 'queued'", [id]);
  }

  /**
   * Writes the result of the job: its output, usage, error, and status. A response its owner cancelled
   * stays cancelled when its job stopped or failed; a job that ended whole before the cancel reached it
   * (completed, or incomplete at its token bound) leaves it as the job ended it: as its stream ended and
   * as it was charged.
   */
  async finish(id: string, state: ResponseState): Promise<void> {
    await this.#pool.query(
      `UPDATE responses SET status = CASE WHEN status = 'cancelled' AND $2 NOT IN ('completed', 'incomplete') THEN status ELSE $2 END,
         output_items = $3, usage = $4, error = $5,
         incomplete_details = $6, completed_at = COALESCE(completed_at, $7)
       WHERE id = $1`,
      [
        id,
        state.status,
        storableJson(state.output),
        state.usage ? JSON.stringify(state.usage) : null,
        state.error ? storableJson(state.error) : null,
        state.incomplete_details ? JSON.stringify(state.incomplete_details) : null,
        new Date((state.completed_at ?? Math.floor(Date.now() / 1000)) * 1000),
      ],
    );
  }

  /** Marks an unfinished response of the account cancelled (its owner's cancel); false when it had ended already. */
  async cancel(accountId: string, id: string, now: Date): Promise<boolean> {
    const { rowCount } = await this.#pool.query(
      "UPDATE responses SET status = 'cancelled', completed_at = $3 WHERE id = $1 AND account_id = $2 AND status IN ('queued', 'in_progress')",
      [id, accountId, now],
    );
    return (rowCount ?? 0) > 0;
  }

  /**
   * Deletes the account's response; returns what was deleted (null: none, another account's, expired, or
   * deleted already: of concurrent deletes, only one gets it back).
   */
  async delete(accountId: string, id: string): Promise<StoredResponse | null> {
    if (!isStorableText(id)) return null;
    const { rows } = await this.#pool.query<Row>("DELETE FROM responses WHERE id = $1 AND account_id = $2 AND expires_at > now() RETURNING *", [id, accountId]);
    return rows[0] ? fromRow(rows[0]) : null;
  }

  /** Extends the lease of a response this process follows. */
  async renew(ids: string[], now: Date): Promise<void> {
    if (ids.length === 0) return;
    await this.#pool.query("UPDATE responses SET follow_until = $2 WHERE id = ANY($1) AND status IN ('queued', 'in_progress')", [
      ids,
      new Date(now.getTime() + this.#leaseMs),
    ]);
  }

  /** Takes over unfinished responses whose lease ran out (the process that followed them stopped). */
  async claimOrphans(now: Date, limit: number): Promise<StoredResponse[]> {
    const { rows } = await this.#pool.query<Row>(
      `UPDATE responses SET follow_until = $2 WHERE id IN (
         SELECT id FROM responses WHERE status IN ('queued', 'in_progress') AND follow_until < $1 ORDER BY follow_until LIMIT $3 FOR UPDATE SKIP LOCKED)
       RETURNING *`,
      [now, new Date(now.getTime() + this.#leaseMs), limit],
    );
    return rows.map(fromRow);
  }

  /** Deletes expired responses (a batch); returns how many. */
  async deleteExpired(now: Date, limit = 1000): Promise<number> {
    const { rowCount } = await this.#pool.query(
      "DELETE FROM responses WHERE id IN (SELECT id FROM responses WHERE expires_at < $1 ORDER BY expires_at LIMIT $2)",
      [now, limit],
    );
    return rowCount ?? 0;
  }
}
