import type { Pool, PoolClient, QueryResult } from 'pg';
import { monotonicClock, type Clock } from '../../core/clock.js';
import { ConfigError, LeaseLostError, type LeaseLostReason } from '../../core/errors.js';
import { optionalNumber, requireOptions } from '../../core/validate.js';
import { abandonWait } from './cancel.js';

export interface PgSessionOptions {
  /**
   * Makes the connection a lease the server enforces: the session sets `idle_session_timeout` to
   * `leaseMs` and runs a heartbeat every `leaseMs / 3`, so a holder that stops (SIGSTOP, a GC
   * pause, a partition) has its connection — and every lock on it — ended by Postgres after
   * `leaseMs`, while its own signal aborts at the local deadline (send time of the last
   * acknowledged heartbeat + `leaseMs` − `safetyMarginMs`) before that. Needs Postgres ≥ 14.
   * @default undefined: no heartbeat; the lease lasts as long as the connection
   */
  leaseMs?: number;
  /** @default leaseMs / 5 */
  safetyMarginMs?: number;
  /** @default monotonicClock */
  clock?: Clock;
}

/** Validated session options (shared by the recipes that pin a session). */
export function sessionOptions(o: PgSessionOptions): PgSessionOptions {
  if (o.leaseMs === undefined) {
    if (o.safetyMarginMs !== undefined) throw new ConfigError('safetyMarginMs', 'only applies with leaseMs');
    return { clock: o.clock ?? monotonicClock };
  }
  const leaseMs = optionalNumber('leaseMs', o.leaseMs, 0, { integer: true, min: 100, max: 2 ** 31 - 1 });
  const safetyMarginMs = optionalNumber('safetyMarginMs', o.safetyMarginMs, leaseMs / 5, { min: 0, exclusiveMin: true });
  if (safetyMarginMs >= (leaseMs * 2) / 3) {
    throw new ConfigError('safetyMarginMs', `must be less than 2/3 of leaseMs (${leaseMs}), got ${safetyMarginMs}`);
  }
  return { leaseMs, safetyMarginMs, clock: o.clock ?? monotonicClock };
}

/**
 * One pinned connection: the owner of liveness for Postgres session locks. The client is taken
 * out of the pool for the session's life, so pool churn never touches it; `signal` aborts when
 * the connection errors or ends (or, with `leaseMs`, when a heartbeat fails or is late), and the
 * connection is then destroyed, never returned to the pool while it may hold a lock.
 */
export class PgSession {
  readonly client: PoolClient;
  readonly #abort = new AbortController();
  readonly #opts: PgSessionOptions;
  readonly #clock: Clock;
  #deadline = Infinity;
  #hbTimer: NodeJS.Timeout | undefined;
  #deadlineTimer: NodeJS.Timeout | undefined;
  #returned = false;
  readonly #onError = (e: unknown): void => this.#lose('connection-lost', e);
  readonly #onEnd = (): void => this.#lose('connection-lost');

  private constructor(client: PoolClient, opts: PgSessionOptions) {
    this.client = client;
    this.#opts = opts;
    this.#clock = opts.clock ?? monotonicClock;
    client.on('error', this.#onError);
    client.on('end', this.#onEnd);
  }

  /** Pins a client from `pool`; with `leaseMs`, arms the server-side timeout. */
  static async open(pool: Pool, options?: PgSessionOptions): Promise<PgSession> {
    const opts = sessionOptions(requireOptions('options', options));
    const client = await pool.connect();
    const s = new PgSession(client, opts);
    if (opts.leaseMs !== undefined) {
      try {
        await client.query(`SET idle_session_timeout = ${opts.leaseMs | 0}`);
      } catch (e) {
        await s.close(true);
        throw e;
      }
    }
    return s;
  }

  get signal(): AbortSignal {
    return this.#abort.signal;
  }

  /** The local deadline (Infinity without `leaseMs`). */
  get deadline(): number {
    return this.#deadline;
  }

  /**
   * Starts the heartbeat from `sentAt` (the send time of the query that took the lock, which
   * also reset the server's idle timer). No-op without `leaseMs`.
   */
  startHeartbeat(sentAt: number): void {
    const { leaseMs, safetyMarginMs } = this.#opts;
    if (leaseMs === undefined || safetyMarginMs === undefined) return;
    this.#deadline = sentAt + leaseMs - safetyMarginMs;
    this.#armDeadline();
    this.#scheduleBeat(sentAt);
  }

  #armDeadline(): void {
    clearTimeout(this.#deadlineTimer);
    const wait = this.#deadline - this.#clock.now();
    if (wait <= 0) return this.#lose('deadline');
    this.#deadlineTimer = setTimeout(() => (this.#clock.now() >= this.#deadline ? this.#lose('deadline') : this.#armDeadline()), wait);
  }

  #scheduleBeat(lastSentAt: number): void {
    const wait = lastSentAt + (this.#opts.leaseMs ?? 0) / 3 - this.#clock.now();
    this.#hbTimer = setTimeout(() => void this.#beat(), Math.max(0, wait));
  }

  async #beat(): Promise<void> {
    if (this.#abort.signal.aborted) return;
    const sentAt = this.#clock.now();
    try {
      await this.client.query('SELECT 1');
    } catch (e) {
      return this.#lose('renew-failed', e);
    }
    if (this.#abort.signal.aborted) return;
    const deadline = sentAt + (this.#opts.leaseMs ?? 0) - (this.#opts.safetyMarginMs ?? 0);
    if (this.#clock.now() >= deadline) return this.#lose('deadline');
    this.#deadline = deadline;
    this.#armDeadline();
    this.#scheduleBeat(sentAt);
  }

  /** Runs a query on the pinned connection. */
  query(sql: string, params?: unknown[]): Promise<QueryResult> {
    return this.client.query(sql, params);
  }

  #stopTimers(): void {
    clearTimeout(this.#hbTimer);
    clearTimeout(this.#deadlineTimer);
  }

  #lose(reason: LeaseLostReason, cause?: unknown): void {
    if (this.#abort.signal.aborted) return;
    this.#stopTimers();
    this.#abort.abort(new LeaseLostError(reason, `postgres session: ${reason === 'connection-lost' ? 'connection lost' : reason}`, { cause }));
    // Whatever the connection still holds must go with it, never back to the pool.
    this.#return(true);
  }

  #return(destroy: boolean): void {
    if (this.#returned) return;
    this.#returned = true;
    this.client.off('end', this.#onEnd);
    this.client.off('error', this.#onError);
    // A destroyed client may still emit a late error: it must not crash the process. (A client
    // back in the pool is the pool's to watch.)
    if (destroy) this.client.on('error', () => undefined);
    this.client.release(destroy ? true : undefined);
  }

  /** Ends a session whose connection is waiting for a lock (see cancel.ts). */
  async abandon(pool: Pool): Promise<void> {
    this.#stopTimers();
    if (!this.#abort.signal.aborted) this.#abort.abort(new LeaseLostError('closed', 'postgres session abandoned'));
    await abandonWait(pool, this.client, () => this.#return(true));
  }

  /**
   * Ends the session. With `destroy` (or when it was lost) the connection is closed; otherwise it
   * is reset and returned to the pool — call only once every lock on it is unlocked.
   */
  async close(destroy = false): Promise<void> {
    this.#stopTimers();
    if (!this.#abort.signal.aborted) {
      if (!destroy && this.#opts.leaseMs !== undefined) {
        await this.client.query('RESET idle_session_timeout').catch(() => (destroy = true));
      }
      this.#abort.abort(new LeaseLostError('closed', 'postgres session closed'));
    }
    this.#return(destroy);
  }
}
