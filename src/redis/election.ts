import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { Candidate } from '../core/candidate.js';
import { ClosedError } from '../core/errors.js';
import type { Lease } from '../core/lease.js';
import { optionalString, requireOptions } from '../core/validate.js';
import { RedisLock, type RedisLockOptions } from './lock.js';

export interface RedisElectionOptions extends RedisLockOptions {
  /** This participant's identity. @default a random UUID */
  id?: string;
}

/**
 * Leader election over a {@link RedisLock}: the term is the lock's lease, so the leader's
 * `signal` aborts before another candidate can win, and each term's fence exceeds the previous.
 * For the lifecycle manager (`Candidate`). Waiting candidates are woken by the resigning
 * leader's release.
 */
export class RedisElection implements Candidate, AsyncDisposable {
  readonly id: string;
  readonly #lock: RedisLock;
  #term: Lease | undefined;
  #closed = false;

  constructor(redis: Redis, name: string, options?: RedisElectionOptions) {
    const o = requireOptions('options', options);
    this.id = optionalString('id', o.id, randomUUID(), { maxLength: 200 });
    this.#lock = new RedisLock(redis, name, o);
  }

  /** The election's name. */
  get name(): string {
    return this.#lock.name;
  }

  async campaign(options?: { signal?: AbortSignal }): Promise<Lease> {
    const o = requireOptions('options', options);
    o.signal?.throwIfAborted();
    if (this.#closed) throw new ClosedError(`redis election '${this.name}'`);
    if (this.#term && !this.#term.lost) return this.#term;
    const lease = await this.#lock.acquire(o.signal ? { signal: o.signal } : {});
    if (this.#closed) {
      await lease.release();
      throw new ClosedError(`redis election '${this.name}'`);
    }
    this.#term = lease;
    return lease;
  }

  /** Ends the current term, if any (the next `campaign()` queues again). */
  async resign(): Promise<void> {
    const t = this.#term;
    this.#term = undefined;
    await t?.release();
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await this.resign().catch(() => undefined);
    await this.#lock.close();
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }
}
