import type { Pool, PoolClient, QueryResult } from 'pg';
import type { Clock } from '../../core/clock.js';
import { leaseTiming, LocalDeadline } from '../../core/deadline.js';
import { ConfigError, LeaseLostError, type LeaseLostReason } from '../../core/errors.js';
import { withoutStack } from '../../core/lease.js';
import { optionalNumber } from '../../core/validate.js';
import { abandonWait } from './cancel.js';
import { connectWithin, queryWithin } from './errors.js';

/** Validated timing of a Postgres lease (`ttlMs` unset: the lease lasts as long as the connection). */
export interface PgTiming {
  readonly ttlMs: number | undefined;
  readonly safetyMarginMs: number | undefined;
  readonly clock: Clock;
  /** Bound on every phase that is not the lock wait itself (connect, settings, unlock, heartbeat). */
  readonly callTimeoutMs: number;
}

/** Validates `ttlMs` / `safetyMarginMs` with the one margin rule (see core's leaseTiming), and `callTimeoutMs`. */
export function pgTiming(o: { ttlMs?: unknown; safetyMarginMs?: unknown; callTimeoutMs?: unknown }, clock: Clock): PgTiming {
  const callTimeoutMs = optionalNumber('callTimeoutMs', o.callTimeoutMs, 5000, { integer: true, min: 1, max: 2 ** 31 - 1 });
  if (o.ttlMs === undefined) {
    if (o.safetyMarginMs !== undefined) throw new ConfigError('safetyMarginMs', 'only applies with ttlMs');
    return { ttlMs: undefined, safetyMarginMs: undefined, clock, callTimeoutMs };
  }
  const t = leaseTiming(o, { minTtlMs: 100 });
  return { ...t, clock, callTimeoutMs };
}

/** The heartbeat period of a session with `ttlMs`: a third of it, like every backend's refresh. */
export function heartbeatMs(ttlMs: number): number {
  return ttlMs / 3;
}

/**
 * One pinned connection: the owner of liveness for Postgres session locks. The client is taken
 * out of the pool for the session's life, so pool churn never touches it; `signal` aborts when
 * the connection errors or ends (or, with `ttlMs`, when a heartbeat fails or is late), and the
 * connection is then destroyed, never returned to the pool while it may hold a lock.
 *
 * With `ttlMs` the connection is a lease the server enforces: the lock's transaction sets
 * `idle_in_transaction_session_timeout` to `ttlMs` and the session runs a heartbeat every
 * `ttlMs / 3`, so a holder that stops (SIGSTOP, a GC pause, a partition) has its connection — and
 * its lock — ended by Postgres after `ttlMs`, while its own signal aborts at the local deadline
 * (core's LocalDeadline) before that.
 *
 * The lock is held in a transaction the session keeps open ({@link PgSession.lockSql}), with an
 * xact-level advisory lock, not a session-level one. Why: behind a transaction pooler
 * (PgBouncer `pool_mode = transaction`) a server connection is the client's only while a
 * transaction is open. A session-level lock stayed on a server connection that the pooler then
 * handed to other clients: one of them was granted the same lock at once (advisory locks are
 * re-entrant per backend: two holders), and the holder's `pg_advisory_unlock` ran on another
 * backend (the lock leaked until the pooler retired that connection). An open transaction pins
 * the backend for the lease's life in every pool mode, and its end (ROLLBACK, or the connection
 * dying) is the lock's end. Hazard: the transaction may hold back vacuum's horizon while the lock
 * is held (`nextval` assigns a transaction id once in 32 calls); keep session locks for leases,
 * not for days.
 */
export class PgSession {
  readonly client: PoolClient;
  readonly #abort = new AbortController();
  readonly #timing: PgTiming;
  #deadline: LocalDeadline | undefined;
  #hbTimer: NodeJS.Timeout | undefined;
  /** A lost lease's connection, kept until its holder releases or the server would end it (see #lose). */
  #keepTimer: NodeJS.Timeout | undefined;
  #lost = false;
  #returned = false;
  /** What a clean close sends: the lock's transaction ends with it (see endWith). */
  #endSql = 'ROLLBACK';
  readonly #onError = (e: unknown): void => this.#lose('connection-lost', e);
  readonly #onEnd = (): void => this.#lose('connection-lost');

  private constructor(client: PoolClient, timing: PgTiming) {
    this.client = client;
    this.#timing = timing;
    client.on('error', this.#onError);
    client.on('end', this.#onEnd);
  }

  /** Pins a client from `pool` (within `callTimeoutMs`). */
  static async create(pool: Pool, timing: PgTiming, signal?: AbortSignal): Promise<PgSession> {
    const client = await connectWithin(pool, timing.callTimeoutMs, 'postgres session: connect', signal);
    return new PgSession(client, timing);
  }

  /**
   * The statements that open the lock's transaction and run `take` in it (with `ttlMs`, the
   * server-side idle timeout first). Send as one simple query; the last result is `take`'s.
   */
  lockSql(take: string): string {
    const idle = this.#timing.ttlMs === undefined ? '' : `SET LOCAL idle_in_transaction_session_timeout = ${this.#timing.ttlMs | 0}; `;
    return `BEGIN; ${idle}${take}`;
  }

  get signal(): AbortSignal {
    return this.#abort.signal;
  }

  /** The local deadline (Infinity without `ttlMs`). */
  get deadline(): number {
    return this.#deadline?.at ?? Infinity;
  }

  /**
   * Starts the heartbeat from `sentAt` (the send time of the query that took the lock, which
   * also reset the server's idle timer). No-op without `ttlMs`.
   */
  startHeartbeat(sentAt: number): void {
    const { ttlMs, safetyMarginMs, clock } = this.#timing;
    if (ttlMs === undefined || safetyMarginMs === undefined) return;
    this.#deadline = new LocalDeadline({ clock, safetyMarginMs, onExpire: () => this.#lose('deadline') }, sentAt, ttlMs);
    this.#scheduleBeat(sentAt);
  }

  #scheduleBeat(lastSentAt: number): void {
    if (this.#abort.signal.aborted) return;
    const wait = lastSentAt + heartbeatMs(this.#timing.ttlMs ?? 0) - this.#timing.clock.now();
    this.#hbTimer = setTimeout(() => void this.#beat(), Math.max(0, wait));
  }

  async #beat(): Promise<void> {
    if (this.#abort.signal.aborted || !this.#deadline || this.#deadline.expired()) return;
    const sentAt = this.#timing.clock.now();
    try {
      await queryWithin(this.client.query('SELECT 1'), this.#timing.callTimeoutMs, 'postgres session: heartbeat', undefined);
    } catch (e) {
      return this.#lose('renew-failed', e);
    }
    if (this.#abort.signal.aborted) return;
    if (!this.#deadline.acknowledged(sentAt, this.#timing.ttlMs!)) return;
    this.#scheduleBeat(sentAt);
  }

  /** What a clean `close()` sends instead of ROLLBACK: statements that end the lock's transaction (a guarded lock deletes its row and commits). */
  endWith(sql: string): void {
    this.#endSql = sql;
  }

  /** Runs a query on the pinned connection. */
  query(sql: string, params?: unknown[]): Promise<QueryResult> {
    return this.client.query(sql, params);
  }

  #stopTimers(): void {
    clearTimeout(this.#hbTimer);
    this.#deadline?.stop();
  }

  #lose(reason: LeaseLostReason, cause?: unknown): void {
    if (this.#abort.signal.aborted) {
      if (reason === 'connection-lost') this.#return(true); // a kept connection ended: let it go now
      return;
    }
    this.#stopTimers();
    this.#lost = true;
    this.#abort.abort(new LeaseLostError(reason, `postgres session: ${reason === 'connection-lost' ? 'connection lost' : reason}`, { cause }));
    const { ttlMs, safetyMarginMs, clock } = this.#timing;
    if (reason !== 'connection-lost' && this.#deadline && ttlMs !== undefined && safetyMarginMs !== undefined) {
      // The connection may well be alive (a late heartbeat): closing it now would end the lock's
      // transaction at once, and the name would be granted elsewhere while the holder, told just
      // now, is still stopping (a drain, `tenure run --grace`). Keep it, never back to the pool,
      // until the holder releases or until the server would have ended it anyway.
      const keepMs = Math.max(0, this.#deadline.at + safetyMarginMs - clock.now());
      this.#keepTimer = setTimeout(() => this.#return(true), keepMs);
      this.#keepTimer.unref();
      return;
    }
    // Whatever the connection still holds must go with it, never back to the pool.
    this.#return(true);
  }

  #return(destroy: boolean): void {
    if (this.#returned) return;
    this.#returned = true;
    clearTimeout(this.#keepTimer);
    this.client.off('end', this.#onEnd);
    this.client.off('error', this.#onError);
    // A destroyed client may still emit a late error: it must not crash the process. (A client
    // back in the pool is the pool's to watch.)
    if (destroy) this.client.on('error', () => undefined);
    this.client.release(destroy ? true : undefined);
  }

  /** Ends a session whose connection is waiting for a lock (see cancel.ts). */
  async abandon(waiting?: Promise<unknown>): Promise<void> {
    this.#stopTimers();
    if (!this.#abort.signal.aborted) this.#abort.abort(new LeaseLostError('closed', 'postgres session abandoned'));
    await abandonWait(this.client, () => this.#return(true), this.#timing.callTimeoutMs, waiting);
  }

  /**
   * Ends the session: rolls back the lock's transaction (or sends what `endWith` set), which releases its lock, and returns the
   * connection to the pool. With `destroy`, when it was lost, or when the rollback fails or is
   * late, the connection is closed instead, which ends the transaction at the server too.
   */
  async close(destroy = false): Promise<void> {
    this.#stopTimers();
    if (!this.#abort.signal.aborted) {
      if (!destroy) await queryWithin(this.client.query(this.#endSql), this.#timing.callTimeoutMs, 'postgres session: end the transaction', undefined).catch(() => (destroy = true));
      this.#abort.abort(withoutStack(() => new LeaseLostError('closed', 'postgres session closed')));
    }
    this.#return(destroy || this.#lost);
  }
}
