import type { Pool } from 'pg';
import { optionalNumber, requireOptions } from '../../core/validate.js';
import { connectWithin, pgEndpoint, queryWithin } from './errors.js';
import { SCHEMA_LOCK, keyArgs } from './keys.js';

/**
 * tenure's schema, created idempotently on first use (or run `SCHEMA_SQL` as a migration):
 * - `tenure_fence_seq`: where lock fences come from. A sequence, not a per-name counter row,
 *   on purpose: `nextval` never rolls back, so a fence handed to a holder whose transaction later
 *   aborted (its connection was killed while it was paused, say) is never handed out again, and a
 *   zombie can never share a fence with its successor. Fences are strictly increasing in
 *   acquisition order for every name (each is taken after the lock is granted), not dense.
 * - `tenure_fence`: the highest fence each PostgresFencedResource has accepted.
 * - `tenure_holder`: who took each session lock last (id, fence, backend pid). A row is only a
 *   claim: `holder()` believes it only while that backend still holds the advisory lock
 *   (pg_locks), so a dead holder's row is never reported. Unlogged: it needs no WAL, and after a
 *   crash the locks it describes are gone too.
 */
export const SCHEMA_SQL = `
CREATE SEQUENCE IF NOT EXISTS tenure_fence_seq AS bigint;
CREATE TABLE IF NOT EXISTS tenure_fence (
  resource text PRIMARY KEY,
  fence bigint NOT NULL CHECK (fence >= 0)
);
CREATE UNLOGGED TABLE IF NOT EXISTS tenure_holder (
  name text PRIMARY KEY,
  holder_id text NOT NULL,
  fence bigint NOT NULL,
  pid integer NOT NULL
);`;

const ready = new WeakMap<Pool, Promise<void>>();

/**
 * Creates the schema once per pool, each phase within `callTimeoutMs` (default 10 s). Concurrent `CREATE … IF NOT EXISTS` can still collide in the
 * catalog, so creation runs under a reserved advisory lock.
 */
export interface EnsureSchemaOptions {
  /** Bound in ms on taking a connection and on the schema statements. @default 10000 */
  callTimeoutMs?: number;
}

export function ensureSchema(pool: Pool, options?: EnsureSchemaOptions): Promise<void> {
  const ms = optionalNumber('callTimeoutMs', requireOptions('options', options).callTimeoutMs, 10_000, { integer: true, min: 1, max: 2 ** 31 - 1 });
  let p = ready.get(pool);
  if (!p) {
    p = (async () => {
      const client = await connectWithin(pool, ms, 'ensureSchema');
      try {
        await queryWithin(client.query(`BEGIN; SELECT pg_advisory_xact_lock(${keyArgs(SCHEMA_LOCK)}); ${SCHEMA_SQL} COMMIT;`), ms, 'ensureSchema', pgEndpoint(pool), () => client.release(true));
        client.release();
      } catch (e) {
        client.release(e instanceof Error ? e : true);
        throw e;
      }
    })();
    ready.set(pool, p);
    p.catch(() => ready.delete(pool));
  }
  return p;
}
