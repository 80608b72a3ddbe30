import { waitScope } from '../../core/abort.js';
import type { Candidate } from '../../core/candidate.js';
import { ClosedError, NotLeaderError } from '../../core/errors.js';
import type { Lease, LeaseController } from '../../core/lease.js';
import { optionalSignal, requireOptions } from '../../core/validate.js';
import { requireName, requireSession, toValue } from './names.js';
import { observeLeader, readLeader, type LeaderInfo } from './observe.js';
import { RevisionQueue, type QueueStats, type Slot } from './queue.js';
import type { EtcdSession } from './session.js';

/** A leadership term: a {@link Lease} plus the election's own operations. */
export interface Term extends Lease {
  /** The leader key, `<name>/<lease id hex>`. */
  readonly key: string;
  /** The value last campaigned with or proclaimed. */
  readonly value: Buffer;
  /** Ends the term: aborts `signal`, deletes the key (owner-checked). Same as `release()`. */
  resign(): Promise<void>;
  /**
   * Publishes a new value while keeping the term (the fence stays the term's). Guarded by the
   * key's create_revision; rejects with NotLeaderError (and ends the term) if it is no longer ours.
   */
  proclaim(value: string | Buffer): Promise<void>;
}

export interface EtcdCampaignOptions {
  /** Aborts the campaign; the queued key is removed. */
  signal?: AbortSignal;
  /** Gives up after this many ms with AcquireTimeoutError; the queued key is removed. */
  timeoutMs?: number;
}

export interface EtcdElectionOptions {
  /** The value `campaign()` uses when given none. @default the session's lease id in hex */
  value?: string | Buffer;
}

/**
 * Leader election on etcd, like etcd's `concurrency.Election` (same key layout, so it
 * interoperates with `etcdctl elect`), plus a fence per term and a signal that aborts before
 * the server can elect someone else. Candidates queue by `create_revision`; each watches only
 * its predecessor.
 */
export class EtcdElection implements Candidate, AsyncDisposable {
  readonly name: string;
  readonly session: EtcdSession;
  readonly #queue: RevisionQueue;
  readonly #defaultValue: Buffer;
  #term: { ctl: LeaseController; slot: Slot; term: Term } | undefined;
  readonly #campaigns = new Set<AbortController>();
  #closed = false;

  constructor(session: EtcdSession, name: string, options?: EtcdElectionOptions) {
    this.session = requireSession(session);
    this.name = requireName('name', name);
    const o = requireOptions('options', options);
    this.#defaultValue = o.value === undefined ? Buffer.from(this.session.leaseIdHex) : toValue('value', o.value);
    this.#queue = new RevisionQueue(this.session, this.name, `election ${this.name}`);
  }

  /** This candidate's key, as other participants see it. */
  get id(): string {
    return this.#queue.key;
  }

  /** Counters: predecessor watches and wake-ups. */
  get stats(): Readonly<QueueStats> {
    return this.#queue.stats;
  }

  /** The current term, if this candidate leads. */
  get term(): Term | undefined {
    return this.#term && !this.#term.ctl.ended ? this.#term.term : undefined;
  }

  /**
   * Waits until this candidate leads; resolves with the {@link Term}. An aborted campaign
   * deletes its key; a campaign whose key disappears while queued (session expired) rejects with
   * SessionExpiredError at once.
   */
  campaign(options?: EtcdCampaignOptions): Promise<Term>;
  campaign(value: string | Buffer, options?: EtcdCampaignOptions): Promise<Term>;
  async campaign(a?: string | Buffer | EtcdCampaignOptions, b?: EtcdCampaignOptions): Promise<Term> {
    const plain = a !== undefined && typeof a !== 'string' && !Buffer.isBuffer(a);
    const value = a === undefined || plain ? this.#defaultValue : toValue('value', a);
    const o = requireOptions('options', plain ? (a as EtcdCampaignOptions) : b);
    optionalSignal('signal', o.signal);
    this.#checkOpen();
    if (this.term) throw new NotLeaderError(`election ${this.name}: already leading; resign first`);
    const mine = new AbortController();
    this.#campaigns.add(mine);
    const scope = waitScope(`election ${this.name}: campaign`, { signal: o.signal ? AbortSignal.any([o.signal, mine.signal]) : mine.signal, timeoutMs: o.timeoutMs });
    try {
      const got = await this.#queue.acquire(value, scope.signal);
      return this.#begin(got!.slot, got!.fence, value);
    } finally {
      scope.dispose();
      this.#campaigns.delete(mine);
    }
  }

  /** The current leader, read from etcd (a head that has not claimed yet has no fence). */
  async leader(): Promise<LeaderInfo | undefined> {
    return (await readLeader(this.session.client, this.#queue.prefix)).leader;
  }

  /** Leader changes as an async iterator (see {@link observeLeader}). */
  observe(options?: { signal?: AbortSignal }): AsyncGenerator<LeaderInfo, void, undefined> {
    const o = requireOptions('options', options);
    const signal = optionalSignal('signal', o.signal) ?? new AbortController().signal;
    return observeLeader(this.session.client, this.#queue.prefix, signal, this.session.logger);
  }

  /** Aborts any campaign, resigns any term, refuses further use. Idempotent. */
  async close(): Promise<void> {
    this.#closed = true;
    for (const c of this.#campaigns) c.abort(new ClosedError(`election ${this.name}`));
    await this.#term?.ctl.release();
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  #begin(slot: Slot, fence: bigint, initial: Buffer): Term {
    let value = initial;
    const entry = { slot } as { ctl: LeaseController; slot: Slot; term: Term };
    entry.ctl = this.#queue.lease(this.name, slot, fence, () => {
      if (this.#term === entry) this.#term = undefined;
    });
    const lease = entry.ctl.lease;
    const queue = this.#queue;
    const term: Term = Object.freeze({
      name: lease.name,
      fence: lease.fence,
      signal: lease.signal,
      key: queue.key,
      get value() {
        return value;
      },
      get lost() {
        return lease.lost;
      },
      remainingMs: () => lease.remainingMs(),
      throwIfLost: () => lease.throwIfLost(),
      release: () => lease.release(),
      resign: () => lease.release(),
      [Symbol.asyncDispose]: () => lease.release(),
      proclaim: async (next: string | Buffer) => {
        const v = toValue('value', next);
        if (lease.lost) throw new NotLeaderError(`election ${this.name}: term ended; cannot proclaim`, { cause: lease.signal.reason });
        const res = await queue.txn([queue.ownerCompare(slot.rev)], [{ request_put: { key: queue.keyBuf, value: v, lease: this.session.leaseId } }], [], lease.signal);
        if (!res.succeeded) {
          entry.ctl.lose('expired', undefined, `election ${this.name}: leader key is gone`);
          throw new NotLeaderError(`election ${this.name}: no longer the leader; proclaim refused`);
        }
        value = v;
      },
    });
    entry.term = term;
    this.#term = entry;
    if (this.#closed) void term.release();
    return term;
  }

  #checkOpen(): void {
    if (this.#closed) throw new ClosedError(`election ${this.name}`);
    this.session.throwIfLost(`election ${this.name}`);
  }
}
