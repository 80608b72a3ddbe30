import { waitScope } from './abort.js';
import type { Candidate, LeaderInfo } from './candidate.js';
import { BusyError, ClosedError } from './errors.js';
import type { Lease } from './lease.js';
import { LeaseEmitter } from './lease-events.js';
import { SIGNAL_KEYS, WAIT_KEYS, type WaitOptions } from './options.js';
import { optionalSignal, requireOptions } from './validate.js';

/** What a lock-backed election is made of. */
export interface LeaseCandidateInit {
  /** This participant's identity (validated by the backend). */
  readonly id: string;
  /** The election's name. */
  readonly name: string;
  /** Names the election in errors, e.g. `redis election 'jobs'`. */
  readonly what: string;
  /** Waits for the lease; must reject with `signal.reason` when `signal` aborts. */
  readonly acquire: (signal: AbortSignal) => Promise<Lease>;
  /** Reads the current holder. */
  readonly leader: (signal: AbortSignal) => Promise<LeaderInfo | undefined>;
  /** Leader changes (see {@link Candidate.observe}). */
  readonly observe: (signal: AbortSignal) => AsyncGenerator<LeaderInfo | undefined, void, undefined>;
  /** Frees what the acquirer holds, after the term has ended. */
  readonly close?: () => Promise<void>;
}

/**
 * A {@link Candidate} made from any way of acquiring a lease: the term is the lease. Gives every
 * lock-backed election (Redis, Postgres) the same contract: a live term is returned again rather
 * than acquired twice, a concurrent campaign is refused, `close()` aborts a campaign in flight
 * and ends the term, a lease won after the caller gave up is released at once instead of leaking,
 * and after a loss the next `campaign()` acquires a new lease.
 */
export class LeaseCandidate extends LeaseEmitter implements Candidate {
  readonly id: string;
  readonly name: string;
  readonly #init: LeaseCandidateInit;
  readonly #closing = new AbortController();
  #term: Lease | undefined;
  #campaigning = false;

  constructor(init: LeaseCandidateInit) {
    super();
    this.#init = init;
    this.id = init.id;
    this.name = init.name;
  }

  get term(): Lease | undefined {
    return this.#term && !this.#term.lost ? this.#term : undefined;
  }

  async campaign(options?: WaitOptions): Promise<Lease> {
    const o = requireOptions('options', options, WAIT_KEYS);
    optionalSignal('signal', o.signal);
    o.signal?.throwIfAborted();
    if (this.#closing.signal.aborted) throw new ClosedError(this.#init.what);
    const live = this.term;
    if (live) return live;
    if (this.#campaigning) throw new BusyError(`${this.#init.what}: a campaign is already in flight on this candidate`);
    const scope = waitScope(`${this.#init.what}: campaign`, { signal: o.signal ? AbortSignal.any([o.signal, this.#closing.signal]) : this.#closing.signal, timeoutMs: o.timeoutMs });
    this.#campaigning = true;
    try {
      const lease = await this.#init.acquire(scope.signal);
      if (scope.signal.aborted) {
        await lease.release().catch(() => undefined);
        throw scope.signal.reason;
      }
      this.#term = lease;
      return this.announce(lease);
    } finally {
      this.#campaigning = false;
      scope.dispose();
    }
  }

  async resign(): Promise<void> {
    const t = this.#term;
    this.#term = undefined;
    await t?.release();
  }

  leader(options?: WaitOptions): Promise<LeaderInfo | undefined> {
    const o = requireOptions('options', options, WAIT_KEYS);
    const scope = waitScope(`${this.#init.what}: leader`, { signal: optionalSignal('signal', o.signal), timeoutMs: o.timeoutMs });
    return this.#init.leader(scope.signal).finally(() => scope.dispose());
  }

  observe(options?: { signal?: AbortSignal }): AsyncGenerator<LeaderInfo | undefined, void, undefined> {
    const o = requireOptions('options', options, SIGNAL_KEYS);
    const signal = optionalSignal('signal', o.signal) ?? new AbortController().signal;
    return this.#init.observe(signal);
  }

  async close(): Promise<void> {
    if (this.#closing.signal.aborted) return;
    this.#closing.abort(new ClosedError(this.#init.what));
    await this.resign().catch(() => undefined);
    await this.#init.close?.();
  }

  /** Same as `close()`, for `await using`. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }
}
