import type { Candidate } from './candidate.js';
import { ClosedError } from './errors.js';
import type { Lease } from './lease.js';
import { requireOptions, requireString } from './validate.js';

/**
 * A {@link Candidate} made from any way of acquiring a lease: the term is the lease. Gives every
 * lock-backed election the same contract: a live term is returned again rather than acquired
 * twice, `close()` aborts a campaign in flight and ends the term, and a lease won after the
 * caller gave up is released at once instead of leaking.
 */
export class LeaseCandidate implements Candidate, AsyncDisposable {
  readonly id: string;
  readonly #what: string;
  readonly #acquire: (signal: AbortSignal) => Promise<Lease>;
  readonly #onClose: () => Promise<void>;
  readonly #closing = new AbortController();
  #term: Lease | undefined;

  /**
   * @param id this participant's identity
   * @param what names the election in errors, e.g. `redis election 'jobs'`
   * @param acquire waits for the lease; must reject with `signal.reason` when `signal` aborts
   * @param onClose frees what the acquirer holds, after the term has ended
   */
  constructor(id: string, what: string, acquire: (signal: AbortSignal) => Promise<Lease>, onClose: () => Promise<void> = async () => undefined) {
    this.id = requireString('id', id, { maxLength: 200 });
    this.#what = what;
    this.#acquire = acquire;
    this.#onClose = onClose;
  }

  /** The current term, while it lasts. */
  get term(): Lease | undefined {
    return this.#term && !this.#term.lost ? this.#term : undefined;
  }

  async campaign(options?: { signal?: AbortSignal }): Promise<Lease> {
    const o = requireOptions('options', options);
    o.signal?.throwIfAborted();
    if (this.#closing.signal.aborted) throw new ClosedError(this.#what);
    const live = this.term;
    if (live) return live;
    const signal = o.signal ? AbortSignal.any([o.signal, this.#closing.signal]) : this.#closing.signal;
    const lease = await this.#acquire(signal);
    if (signal.aborted) {
      await lease.release().catch(() => undefined);
      throw signal.reason;
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

  /** Aborts a campaign in flight, ends the term and frees the acquirer. Idempotent. */
  async close(): Promise<void> {
    if (this.#closing.signal.aborted) return;
    this.#closing.abort(new ClosedError(this.#what));
    await this.resign().catch(() => undefined);
    await this.#onClose();
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }
}
