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
 * - `tenure_holder`: the id of each session-lock participant, per (name, backend pid), written
 *   before it takes the lock (see holder.ts). A row is only a claim: `holder()` believes it only
 *   while that backend holds the lock and its fence marks (pg_locks), so a gone holder's row is
 *   never reported. Unlogged: it needs no WAL, and after a crash the locks it describes are gone too.
 */
export const SCHEMA_SQL = `
CREATE SEQUENCE IF NOT EXISTS tenure_fence_seq AS bigint;
CREATE TABLE IF NOT EXISTS tenure_fence (
  resource text PRIMARY KEY,
  fence bigint NOT NULL CHECK (fence >= 0)
);
CREATE UNLOGGED TABLE IF NOT EXISTS tenure_holder (
  name text NOT NULL,
  pid integer NOT NULL,
  holder_id text NOT NULL,
  PRIMARY KEY (name, pid)
);`;

/**
 * The least privileges of every Postgres recipe and PostgresFencedResource, for a role that may
 * not CREATE (run `SCHEMA_SQL` once as an owner, then this with the role's name): nextval on the
 * fence sequence, read/insert/update of the fence table, read/insert/update/delete of the holder
 * table (a participant drops the rows of backends that are gone). Advisory locks and
 * cancelling one's own abandoned waits (the protocol's CancelRequest) need no grant.
 */
export const GRANTS_SQL = (role: string): string => `
GRANT USAGE ON SEQUENCE tenure_fence_seq TO ${role};
GRANT SELECT, INSERT, UPDATE ON tenure_fence TO ${role};
GRANT SELECT, INSERT, UPDATE, DELETE ON tenure_holder TO ${role};`;

const ready = new WeakMap<Pool, Promise<void>>();
/** Pools whose schema is known to exist (ensureSchema succeeded once). */
const created = new WeakSet<Pool>();

/** Options of {@link ensureSchema}. */
export interface EnsureSchemaOptions {
  /** Bound in ms on taking a connection and on the schema statements. @default 10000 */
  callTimeoutMs?: number;
}

/**
 * Creates the schema once per pool, each phase within `callTimeoutMs` (default 10 s). Concurrent `CREATE … IF NOT EXISTS` can still collide in the
 * catalog, so creation runs under a reserved advisory lock.
 */
export function ensureSchema(pool: Pool, options?: EnsureSchemaOptions): Promise<void> {
  let ms: number;
  try {
    ms = optionalNumber('callTimeoutMs', requireOptions('options', options).callTimeoutMs, 10_000, { integer: true, min: 1, max: 2 ** 31 - 1 });
  } catch (e) {
    return Promise.reject(e); // a promise-returning function never throws
  }
  let p = ready.get(pool);
  if (!p) {
    p = (async () => {
      const client = await connectWithin(pool, ms, 'ensureSchema');
      try {
        // A role without CREATE on the schema (PG 15's default for public) may still use a schema
        // an owner made: `CREATE … IF NOT EXISTS` checks the CREATE privilege before existence.
        const have = await queryWithin(
          client.query("SELECT to_regclass('tenure_fence_seq') IS NOT NULL AND to_regclass('tenure_fence') IS NOT NULL AND to_regclass('tenure_holder') IS NOT NULL AS ok"),
          ms,
          'ensureSchema',
          pgEndpoint(pool),
          () => client.release(true),
        );
        if (have.rows[0]?.ok === true) {
          client.release();
          created.add(pool);
          return;
        }
        await queryWithin(client.query(`BEGIN; SELECT pg_advisory_xact_lock(${keyArgs(SCHEMA_LOCK)}); ${SCHEMA_SQL} COMMIT;`), ms, 'ensureSchema', pgEndpoint(pool), () => client.release(true));
        client.release();
        created.add(pool);
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

/**
 * The recipes' way to ensure the schema: what to wait for, or undefined once this pool's schema is
 * known to exist — every lock cycle passes here, and awaiting a settled promise through a signal
 * race each time is work for nothing.
 */
export function schemaPending(pool: Pool, callTimeoutMs: number): Promise<void> | undefined {
  return created.has(pool) ? undefined : ensureSchema(pool, { callTimeoutMs });
}
