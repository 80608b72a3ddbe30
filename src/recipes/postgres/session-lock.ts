import type { Pool, QueryResult } from 'pg';
import { mapPgError } from './errors.js';
import { raceSignal, waitScope } from '../../core/abort.js';
import { monotonicClock } from '../../core/clock.js';
import { ConfigError } from '../../core/errors.js';
import { LeaseController, type Lease } from '../../core/lease.js';
import { requireOptions } from '../../core/validate.js';
import { advisoryKey, keyArgs, validateName, validateNamespace, DEFAULT_NAMESPACE, type AdvisoryKey } from './keys.js';
import { ensureSchema } from './schema.js';
import { PgSession, sessionOptions, type PgSessionOptions } from './session.js';

export interface PgLockOptions extends PgSessionOptions {
  /** The int4 namespace of the advisory keyspace (see keys.ts). @default 0x74656e75 ('tenu') */
  namespace?: number;
}

export interface PgAcquireOptions {
  signal?: AbortSignal;
  /** @default no limit */
  timeoutMs?: number;
}

/** The rows of the last statement of a multi-statement simple query. */
export function lastRows(r: QueryResult | QueryResult[]): Record<string, unknown>[] {
  const last = Array.isArray(r) ? r[r.length - 1] : r;
  return (last?.rows ?? []) as Record<string, unknown>[];
}

export function requirePool(pool: unknown): Pool {
  if (!pool || typeof (pool as Pool).connect !== 'function' || typeof (pool as Pool).query !== 'function') {
    throw new ConfigError('pool', 'must be a pg Pool');
  }
  return pool as Pool;
}

/**
 * Builds the lease of a session-level advisory lock held on `session`: its signal derives from
 * the session's, its release unlocks and returns the connection (or destroys it if unlocking
 * fails, so a client holding a lock never goes back to the pool).
 */
export function sessionLease(session: PgSession, name: string, k: AdvisoryKey, fence: bigint): Lease {
  const controller = new LeaseController({
    name,
    fence,
    parent: session.signal,
    deadline: () => session.deadline,
    // The lock is the transaction's: the rollback in close() releases it (see session.ts).
    release: () => session.close(session.signal.aborted),
  });
  return controller.lease;
}

/**
 * A session-level advisory lock for work that spans transactions. `acquire()` pins one client out
 * of the pool for the lease's life (pool churn cannot touch it), waits in `pg_advisory_lock`,
 * takes the fence from `tenure_fence_seq`, and aborts the lease's signal if that connection dies.
 * Prefer {@link withXactLock} when the work fits in one transaction.
 *
 * Hazard: without `leaseMs`, a holder that is partitioned away keeps the lock until its TCP
 * connection dies; set `leaseMs` for a lease the server enforces.
 */
export class PgSessionLock {
  readonly name: string;
  readonly #pool: Pool;
  readonly #key: AdvisoryKey;
  readonly #opts: PgSessionOptions;

  constructor(pool: Pool, name: string, options?: PgLockOptions) {
    this.#pool = requirePool(pool);
    this.name = validateName('name', name);
    const o = requireOptions('options', options);
    this.#opts = sessionOptions(o);
    this.#key = advisoryKey(this.name, o.namespace === undefined ? DEFAULT_NAMESPACE : validateNamespace('namespace', o.namespace));
  }

  /** The advisory key this name maps to. */
  get key(): AdvisoryKey {
    return this.#key;
  }

  /** Waits for the lock. On abort or timeout the waiting connection is closed (which ends the wait). */
  async acquire(options?: PgAcquireOptions): Promise<Lease> {
    const o = requireOptions('options', options);
    o.signal?.throwIfAborted();
    const scope = waitScope(`postgres lock '${this.name}'`, o);
    let session: PgSession | undefined;
    try {
      await raceSignal(ensureSchema(this.#pool), scope.signal);
      session = await raceSignal(PgSession.open(this.#pool, this.#opts), scope.signal);
      const s = session;
      const sentAt = monotonicClock.now();
      const q = s.query(s.lockSql(`SELECT pg_advisory_xact_lock(${keyArgs(this.#key)}), nextval('tenure_fence_seq')::text AS fence`));
      const r = await raceSignal(q, scope.signal).catch(async (e: unknown) => {
        q.catch(() => undefined);
        if (scope.signal.aborted) await s.abandon();
        throw mapPgError(e);
      });
      s.startHeartbeat(sentAt);
      return sessionLease(s, this.name, this.#key, BigInt(lastRows(r)[0]!.fence as string));
    } catch (e) {
      await session?.close(true);
      throw e;
    } finally {
      scope.dispose();
    }
  }

  /** One try: the lease, or undefined when another session holds the lock. */
  async tryAcquire(): Promise<Lease | undefined> {
    await ensureSchema(this.#pool);
    const s = await PgSession.open(this.#pool, this.#opts);
    try {
      const sentAt = monotonicClock.now();
      const r = await s
        .query(s.lockSql(`SELECT CASE WHEN pg_try_advisory_xact_lock(${keyArgs(this.#key)}) THEN nextval('tenure_fence_seq')::text END AS fence`))
        .catch((e: unknown) => Promise.reject(mapPgError(e)));
      const fence = lastRows(r)[0]?.fence as string | null;
      if (fence === null || fence === undefined) {
        await s.close();
        return undefined;
      }
      s.startHeartbeat(sentAt);
      return sessionLease(s, this.name, this.#key, BigInt(fence));
    } catch (e) {
      await s.close(true);
      throw e;
    }
  }
}
