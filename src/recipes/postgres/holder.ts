import type { PoolClient } from 'pg';
import type { LeaderInfo } from '../../core/candidate.js';
import { FENCE_MARKS, keyArgs, type AdvisoryKey } from './keys.js';
import type { TenureTables } from './schema.js';

/**
 * Who holds a session lock, readable by everyone at once and at no extra round trip.
 *
 * - The **fence** is part of the lock itself: in the statement that takes it, after the grant,
 *   the holder also takes two shared advisory locks in tenure's reserved namespaces whose keys are
 *   the fence's high and low 32 bits (`FENCE_MARKS`). Every session sees them in `pg_locks` the
 *   moment they are granted, uncommitted, and they end with the lock's transaction, so a fence is
 *   never shown for a holder that is gone.
 * - The **id** cannot be part of the lock (it is text), so it is a committed row of
 *   the lock's schema's `tenure_holder` keyed by (name, backend pid), written *before* the lock
 *   is taken, in the same message (`BEGIN; upsert; COMMIT; BEGIN; take`): it is visible when the lock is, and costs no
 *   round trip. A client connected straight to its backend (the backend pid the grant reports is
 *   the one the server announced at connect) owns that backend, so it remembers the rows it wrote
 *   and sends the upsert once per client, name and id, not per acquire. Through a pooler the
 *   backend is shared and changes between transactions: such a client sends the upsert with
 *   every acquire (a read when the row is there).
 *
 * `holder()` believes a row only while its backend holds the lock and both fence marks; a holder
 * that took the key another way (an xact lock of the same name, a raw advisory lock) is reported
 * as `pid:<backend pid>` without a fence.
 */

/** Per client that owns its backend: schema NUL name → id of the rows that backend has; 'pooled' when it does not own it. */
const known = new WeakMap<PoolClient, Map<string, string> | 'pooled'>();

/**
 * The statements to send before the lock's transaction, or '' when this client's own backend has
 * its row already: the rows of this name whose backend is gone are dropped (so the table holds at
 * most one row per live backend and name), then the (name, pid) → id row is upserted (a read
 * when it is there). Inlined: a multi-statement query takes no parameters.
 */
export function recordBefore(client: PoolClient, t: TenureTables, name: string, id: string, guarded = false): string {
  const k = known.get(client);
  // A guarded row is written with every acquire: its clean release deletes it.
  if (!guarded && k !== 'pooled' && k?.get(slot(t, name)) === id) return '';
  const [n, i] = [client.escapeLiteral(name), client.escapeLiteral(id)];
  // Dead rows are a guarded grantee's to wait out (guardSql), not anyone's to tidy away first.
  const tidy = guarded ? '' : `DELETE FROM ${t.holder} h WHERE h.name = ${n} AND NOT EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.pid = h.pid);`;
  return `BEGIN;
    ${tidy}
    INSERT INTO ${t.holder} (name, pid, holder_id) SELECT ${n}, pg_backend_pid(), ${i}
      WHERE NOT EXISTS (SELECT 1 FROM ${t.holder} WHERE name = ${n} AND pid = pg_backend_pid() AND holder_id = ${i})
      ON CONFLICT (name, pid) DO UPDATE SET holder_id = EXCLUDED.holder_id;
    COMMIT; `;
}

/** A backend's row is per schema and name: one backend may hold rows of the same name in two schemas' tables. */
function slot(t: TenureTables, name: string): string {
  return `${t.schema}\u0000${name}`;
}

/**
 * After a grant on backend `pid`: notes what this client's backend has, and says whether the
 * row is missing — only when no upsert was sent (the client looked like it owned its backend)
 * and the grant came from another backend; the caller then writes it ({@link recordSql}).
 */
export function mustRecord(client: PoolClient, pid: number, t: TenureTables, name: string, id: string, sent: boolean): boolean {
  const owns = (client as { processID?: unknown }).processID === pid;
  const k = known.get(client);
  if (!owns) {
    known.set(client, 'pooled');
    return !sent;
  }
  if (k === undefined) known.set(client, new Map([[slot(t, name), id]]));
  else if (k !== 'pooled') k.set(slot(t, name), id);
  return false;
}

/**
 * The guard of a session lock with `ttlMs` (see PgSessionLock): Postgres frees a connection's
 * locks the moment that connection ends — a cut link, a crash of the server, a pooler's restart —
 * while its holder learns of it only when it reads its socket, and a holder stalled or cut off
 * from the server believes it holds until its local deadline. So a guarded grant is handed out
 * only once any such holder's deadline has passed: the statement after the grant (same message)
 * says whether a participant of the name has a row whose backend is gone (it may have died
 * holding; a clean release deletes its row with the lock, in one commit), and how long the server
 * has been up (every lock of a crashed or restarted server went with it, and the rows of an
 * unlogged table with them). `over`: backends of this process's own sessions of the name whose
 * end it has seen (their leases' signals have aborted, so nobody believes on them): their rows are
 * no reason to wait — a holder that lost its own connection campaigns again without waiting out
 * itself.
 *
 * "Gone" includes a backend on its way out: an ending backend frees its locks (and so wakes the
 * grantee) before it leaves pg_stat_activity, where it stays a moment as it was, typically 'idle
 * in transaction' (1 grant in 40 read it there after a pg_terminate_backend). A live backend in
 * a transaction always holds its own virtualxid lock, an ending one no longer does; one that is
 * 'idle' is in no transaction and so holds nothing. So a row counts as possibly lost unless its
 * backend is idle or holds its virtualxid.
 */
export function guardSql(client: PoolClient, t: TenureTables, name: string, over: readonly number[] = []): string {
  const known = over.length === 0 ? '' : ` AND h.pid <> ALL (ARRAY[${over.map((p) => p | 0).join(',')}]::int[])`;
  return `SELECT EXISTS (SELECT 1 FROM ${t.holder} h WHERE h.name = ${client.escapeLiteral(name)} AND h.pid <> pg_backend_pid()${known}
      AND NOT EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.pid = h.pid
        AND (a.state = 'idle' OR EXISTS (SELECT 1 FROM pg_locks v WHERE v.pid = a.pid AND v.locktype = 'virtualxid')))) AS dead,
    (extract(epoch FROM clock_timestamp() - pg_postmaster_start_time()) * 1000)::bigint::text AS up_ms`;
}

/** A guarded lock's clean release: its row goes in the same commit that ends the lock's transaction (so no grantee waits for it). */
export function releaseSql(client: PoolClient, t: TenureTables, name: string): string {
  return `DELETE FROM ${t.holder} WHERE name = ${client.escapeLiteral(name)} AND pid = pg_backend_pid(); COMMIT`;
}

/** Deletes the rows of `$1` whose backend is gone, but for backend `$2`'s (a guarded grantee's, after it waited them out). */
export function tidySql(t: TenureTables): string {
  return `DELETE FROM ${t.holder} h WHERE h.name = $1 AND h.pid <> $2 AND NOT EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.pid = h.pid)`;
}

/** Deletes backend `$2`'s row of `$1` (a guarded waiter that gave up: it never held). */
export function forgetSql(t: TenureTables): string {
  return `DELETE FROM ${t.holder} WHERE name = $1 AND pid = $2`;
}

/** The row write for a backend that lacks it, on any connection: `$1` name, `$2` pid, `$3` id. */
export function recordSql(t: TenureTables): string {
  return `INSERT INTO ${t.holder} (name, pid, holder_id) VALUES ($1, $2, $3)
  ON CONFLICT (name, pid) DO UPDATE SET holder_id = EXCLUDED.holder_id`;
}

/**
 * The statement that takes the lock `k` (waiting, or one try), then the fence (after the grant,
 * from the sequence), then the fence's marks; it yields `fence` and `pid`, or no row when a try
 * found the lock taken. The middle subquery is not flattened (it has a volatile target), so
 * `nextval` runs once, after the lock.
 */
export function takeSql(k: AdvisoryKey, tryOnly: boolean, t: TenureTables): string {
  const fenceOf = tryOnly
    ? `SELECT ${t.nextval} AS f WHERE pg_try_advisory_xact_lock(${keyArgs(k)})`
    : `SELECT ${t.nextval} AS f FROM (SELECT pg_advisory_xact_lock(${keyArgs(k)})) AS l`;
  return `SELECT f::text AS fence, pg_backend_pid() AS pid,
    pg_advisory_xact_lock_shared(${FENCE_MARKS.high}, (f >> 32)::int) AS hi,
    pg_advisory_xact_lock_shared(${FENCE_MARKS.low}, f::bit(32)::int) AS lo
    FROM (${fenceOf}) AS x`;
}

/**
 * The holder of the lock `$2, $3` (namespace, key; as unsigned) named `$1`: one snapshot of
 * pg_locks (materialized, so the lock and its marks are read together), the marks joined by pid.
 */
export function holderSql(t: TenureTables): string {
  return `WITH l AS MATERIALIZED (
    SELECT pid, classid::bigint AS ns, objid::bigint AS k FROM pg_locks
    WHERE locktype = 'advisory' AND granted AND objsubid = 2
      AND database = (SELECT oid FROM pg_database WHERE datname = current_database()))
  SELECT m.pid, h.holder_id, ((hi.k << 32) | lo.k)::text AS fence
  FROM l m
  LEFT JOIN l hi ON hi.pid = m.pid AND hi.ns = ${FENCE_MARKS.high >>> 0}
  LEFT JOIN l lo ON lo.pid = m.pid AND lo.ns = ${FENCE_MARKS.low >>> 0}
  LEFT JOIN ${t.holder} h ON h.name = $1 AND h.pid = m.pid AND hi.pid IS NOT NULL AND lo.pid IS NOT NULL
  WHERE m.ns = $2 AND m.k = $3
  LIMIT 1`;
}

/** A holderSql row as a LeaderInfo. */
export function holderOf(row: { pid: number; holder_id: string | null; fence: string | null } | undefined): LeaderInfo | undefined {
  if (!row) return undefined;
  const fence = row.fence === null ? undefined : BigInt(row.fence);
  return { id: row.holder_id ?? `pid:${row.pid}`, fence };
}
