import { randomUUID } from 'node:crypto';
import type { Pool } from 'pg';
import { sleep } from '../core/abort.js';
import type { Candidate } from '../core/candidate.js';
import { ClosedError, ConfigError } from '../core/errors.js';
import type { Lease } from '../core/lease.js';
import { optionalNumber, optionalString, requireOptions } from '../core/validate.js';
import { PgSessionLock, requirePool, type PgLockOptions } from './session-lock.js';

export interface PgElectionOptions extends PgLockOptions {
  /** This participant's identity. @default a random UUID */
  id?: string;
  /** First pause between tries. @default 50 */
  minBackoffMs?: number;
  /** Longest pause between tries (doubling, with jitter). @default 1000 */
  maxBackoffMs?: number;
}

/**
 * Leader election over Postgres: a try-lock loop with jittered exponential backoff, each term held
 * on a pinned session ({@link PgSessionLock}), so the leader's signal aborts when its connection
 * dies (or, with `leaseMs`, when its heartbeat is late) and each term's fence exceeds the last.
 * Try-lock rather than a blocking wait, so an idle candidate holds no connection between tries.
 */
export class PgElection implements Candidate, AsyncDisposable {
  readonly id: string;
  readonly #lock: PgSessionLock;
  readonly #minMs: number;
  readonly #maxMs: number;
  readonly #closing = new AbortController();
  #term: Lease | undefined;

  constructor(pool: Pool, name: string, options?: PgElectionOptions) {
    requirePool(pool);
    const o = requireOptions('options', options);
    this.id = optionalString('id', o.id, randomUUID(), { maxLength: 200 });
    this.#minMs = optionalNumber('minBackoffMs', o.minBackoffMs, 50, { min: 1 });
    this.#maxMs = optionalNumber('maxBackoffMs', o.maxBackoffMs, 1000, { min: 1 });
    if (this.#maxMs < this.#minMs) throw new ConfigError('maxBackoffMs', `must be at least minBackoffMs (${this.#minMs}), got ${this.#maxMs}`);
    const { id: _id, minBackoffMs: _a, maxBackoffMs: _b, ...lockOptions } = o;
    this.#lock = new PgSessionLock(pool, name, lockOptions);
  }

  get name(): string {
    return this.#lock.name;
  }

  async campaign(options?: { signal?: AbortSignal }): Promise<Lease> {
    const o = requireOptions('options', options);
    o.signal?.throwIfAborted();
    if (this.#closing.signal.aborted) throw new ClosedError(`postgres election '${this.name}'`);
    if (this.#term && !this.#term.lost) return this.#term;
    const signal = o.signal ? AbortSignal.any([o.signal, this.#closing.signal]) : this.#closing.signal;
    for (let i = 0; ; i++) {
      signal.throwIfAborted();
      const lease = await this.#lock.tryAcquire();
      if (lease) {
        if (signal.aborted) {
          await lease.release();
          signal.throwIfAborted();
        }
        this.#term = lease;
        return lease;
      }
      const cap = Math.min(this.#maxMs, this.#minMs * 2 ** Math.min(i, 20));
      await sleep(cap / 2 + (Math.random() * cap) / 2, signal);
    }
  }

  /** Ends the current term, if any. */
  async resign(): Promise<void> {
    const t = this.#term;
    this.#term = undefined;
    await t?.release();
  }

  async close(): Promise<void> {
    if (this.#closing.signal.aborted) return;
    this.#closing.abort(new ClosedError(`postgres election '${this.name}'`));
    await this.resign().catch(() => undefined);
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }
}
