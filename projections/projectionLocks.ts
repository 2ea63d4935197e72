/**
 * PostgreSQL advisory locks of the projector, two-key (space, hashtext(projection name)).
 *
 * - ACTIVE: held for its whole session by the one active instance of a projection (stand-bys wait).
 * - RESET: taken shared by every batch transaction and exclusively by a rebuild's reset, so a reset
 *   never interleaves with a batch: a batch either commits before the reset or starts after it, from
 *   the start of the log.
 */
export const PROJECTION_LOCK_SPACE = { active: 727_100, reset: 727_101 } as const;
