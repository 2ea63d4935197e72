import { accountStreamId } from "../accounts/accountEvents.ts";
import type { LogPosition } from "../eventStore/logPosition.ts";
import type { Queryable } from "../eventStore/types.ts";
import { merkleRootOfLeaves, type StreamHead } from "./merkleRoot.ts";

/** One account's leaf of a checkpoint's accounts tree: the account id and the heads of its streams in the window, sorted by stream id. */
export type AccountLeaf = [accountId: string, heads: StreamHead[]];

const ACCOUNT_STREAM_PREFIX = accountStreamId("");

/**
 * Which account each stream with an event in (after, upTo] belongs to, as [accountId, streamId] pairs:
 * an event belongs to account A when it is in A's `account-<A>` stream or its data has `accountId` A
 * (readAccountCheckpointProofs takes the same). A stream belongs to every account one of its events in
 * the window belongs to (the checkpoint stream's events belong to none), and its head, its last event
 * in the window, is in A's leaf whichever event it is: A's export (readAuditLog) also holds the events
 * naming no account of a stream an earlier event of which names A (batch end events written before they
 * carried `accountId`). Signed windows depend on this rule: it cannot change without failing them.
 * Same bounds as streamHeadsIn (one window scan).
 */
export async function streamAccountsIn(db: Queryable, after: LogPosition, upTo: LogPosition): Promise<[accountId: string, streamId: string][]> {
  const rows = await db.query<{ account_id: string; stream_id: string }>(
    `SELECT DISTINCT a.account_id, e.stream_id
       FROM es_events e
       CROSS JOIN LATERAL (VALUES (CASE WHEN starts_with(e.stream_id, $5) THEN substr(e.stream_id, $6) END), (e.data->>'accountId')) a(account_id)
      WHERE (e.transaction_id, e.global_position) > ($1::xid8, $2::bigint)
        AND (e.transaction_id, e.global_position) <= ($3::xid8, $4::bigint)
        AND e.transaction_id BETWEEN $1::xid8 AND $3::xid8
        AND a.account_id IS NOT NULL`,
    [after.transactionId, after.globalPosition, upTo.transactionId, upTo.globalPosition, ACCOUNT_STREAM_PREFIX, ACCOUNT_STREAM_PREFIX.length + 1],
  );
  return rows.rows.map((r) => [r.account_id, r.stream_id]);
}

/**
 * The accounts tree's leaves, sorted by account id (UTF-16 code units): one per account with a stream in
 * the window, listing the heads (from `heads`, the checkpoint's) of its streams. A stream of a pair with
 * no head in `heads` is left out (it is not in the window, so the leaf, and the root, then differ from
 * the signed ones).
 */
export function accountLeaves(heads: readonly StreamHead[], pairs: readonly [string, string][]): AccountLeaf[] {
  const byStream = new Map(heads.map((h) => [h[0], h]));
  const byAccount = new Map<string, StreamHead[]>();
  for (const [accountId, streamId] of pairs) {
    const head = byStream.get(streamId);
    if (!head) continue;
    const list = byAccount.get(accountId);
    if (list) list.push(head);
    else byAccount.set(accountId, [head]);
  }
  const leaves: AccountLeaf[] = [...byAccount].map(([accountId, list]) => [accountId, list.sort((a, b) => byCodeUnits(a[0], b[0]))]);
  return leaves.sort((a, b) => byCodeUnits(a[0], b[0]));
}

/** UTF-16 code unit order (JavaScript's string order), independent of any collation. */
function byCodeUnits(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/**
 * The accounts root a checkpoint signs (audit-checkpoint/2): the Merkle root (merkleRoot's tree, leaf =
 * SHA-256(0x00 || canonical JSON of [accountId, [[streamId, version, hash]...]])) over accountLeaves().
 * It commits to which streams of the window belong to which account, so an account's export proves it
 * holds every one of them.
 */
export function accountsRoot(leaves: readonly AccountLeaf[]): string {
  return merkleRootOfLeaves(leaves);
}
