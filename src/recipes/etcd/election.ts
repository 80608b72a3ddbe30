import { LeaseEmitter } from '../../core/lease-events.js';
import { raceSignal, waitScope } from '../../core/abort.js';
import type { Candidate } from '../../core/candidate.js';
import { BusyError, ClosedError, NotLeaderError } from '../../core/errors.js';
import type { Lease, LeaseController } from '../../core/lease.js';
import { SIGNAL_KEYS, WAIT_KEYS, type WaitOptions } from '../../core/options.js';
import { optionalId, optionalSignal, requireOptions } from '../../core/validate.js';
import { toTenureError } from './errors.js';
import { requireName, requireSession, toValue } from './names.js';
import { leaderOf, observeLeader, readLeader, type EtcdLeaderInfo } from './observe.js';
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
   * Publishes a new value while keeping the term (the fence stays the term's); observers see it
   * as the leader's id. Guarded by the key's create_revision; rejects with NotLeaderError (and
   * ends the term) if it is no longer ours.
   */
  proclaim(value: string | Buffer): Promise<void>;
}

/** Options of an {@link EtcdElection}. */
export interface EtcdElectionOptions {
  /**
   * This participant's id: the value its key holds while it campaigns and leads, so it is what
   * `leader()`, `observe()` and `etcdctl elect -l` show. @default a random UUID
   */
  id?: string;
}

/**
 * Leader election on etcd, like etcd's `concurrency.Election` (same key layout, so it
 * interoperates with `etcdctl elect`), plus a fence per term and a signal that aborts before
 * the server can elect someone else. Candidates queue by `create_revision`; each watches only
 * its predecessor. After the session's lease is lost, the next `campaign()` queues again on a
 * new lease of the same session.
 */
export class EtcdElection extends LeaseEmitter implements Candidate {
  readonly name: string;
  readonly id: string;
  /** The session whose lease the candidate's key lives on. */
  readonly session: EtcdSession;
  readonly #queue: RevisionQueue;
  #term: { ctl: LeaseController; term: Term } | undefined;
  readonly #closing = new AbortController();
  #campaigning = false;

  constructor(session: EtcdSession, name: string, options?: EtcdElectionOptions) {
    super();
    this.session = requireSession(session);
    this.name = requireName('name', name);
    const o = requireOptions('options', options, { id: true });
    this.id = optionalId(o.id);
    this.#queue = new RevisionQueue(this.session, this.name, `election ${this.name}`);
  }

  /** This candidate's key under the session's current lease, `<name>/<lease id hex>`. */
  get key(): string {
    return this.#queue.key;
  }

  /** Counters: predecessor watches and wake-ups. */
  get stats(): Readonly<QueueStats> {
    return this.#queue.stats;
  }

  /** The current term, if this candidate leads. */
  get term(): Term | undefined {
    return this.#term && !this.#term.ctl.lease.lost ? this.#term.term : undefined;
  }

  /**
   * Waits until this candidate leads; resolves with the {@link Term} (the live term again when
   * already leading). An aborted campaign deletes its key; a campaign whose key disappears while
   * queued (session expired) rejects with SessionExpiredError at once.
   */
  async campaign(options?: WaitOptions): Promise<Term> {
    const o = requireOptions('options', options, WAIT_KEYS);
    optionalSignal('signal', o.signal);
    this.#checkOpen();
    const live = this.term;
    if (live) return live;
    if (this.#campaigning) throw new BusyError(`election ${this.name}: a campaign is already in flight on this candidate`);
    const scope = waitScope(`election ${this.name}: campaign`, { signal: o.signal ? AbortSignal.any([o.signal, this.#closing.signal]) : this.#closing.signal, timeoutMs: o.timeoutMs });
    this.#campaigning = true;
    try {
      const value = Buffer.from(this.id);
      const got = await this.#queue.acquire(value, scope.signal);
      const term = this.#begin(got!.slot, got!.fence, value);
      if (scope.signal.aborted) {
        // Won just as the caller gave up: hand it back rather than leak a term nobody runs.
        await term.release().catch(() => undefined);
        throw scope.signal.reason;
      }
      return this.announce(term);
    } finally {
      this.#campaigning = false;
      scope.dispose();
    }
  }

  /** Ends the current term, if any (deletes the leader key); the candidate stays usable. */
  async resign(): Promise<void> {
    await this.#term?.ctl.release();
  }

  /**
   * The current leader, read from etcd: the head of the queue. A head that never claimed (fence
   * undefined) is a Go `concurrency.Election` / `etcdctl elect` leader (Go does not re-put its
   * key on winning), or a tenure head in the round trip before its claim.
   */
  async leader(options?: WaitOptions): Promise<EtcdLeaderInfo | undefined> {
    const o = requireOptions('options', options, WAIT_KEYS);
    const scope = waitScope(`election ${this.name}: leader`, { signal: optionalSignal('signal', o.signal), timeoutMs: o.timeoutMs });
    try {
      const { leader, head } = await raceSignal(readLeader(this.session.client, this.#queue.prefix), scope.signal);
      return leader ?? (head && leaderOf(head, undefined));
    } catch (e) {
      throw toTenureError(e, `election ${this.name}: leader`, undefined);
    } finally {
      scope.dispose();
    }
  }

  /** Leader changes as an async iterator: the current leader first (undefined when nobody leads), then every change. */
  observe(options?: { signal?: AbortSignal }): AsyncGenerator<EtcdLeaderInfo | undefined, void, undefined> {
    const o = requireOptions('options', options, SIGNAL_KEYS);
    const signal = optionalSignal('signal', o.signal) ?? new AbortController().signal;
    return observeLeader(this.session.client, this.#queue.prefix, signal, this.session.logger);
  }

  /** Aborts any campaign, resigns any term, refuses further use. Idempotent. */
  async close(): Promise<void> {
    if (!this.#closing.signal.aborted) this.#closing.abort(new ClosedError(`election ${this.name}`));
    await this.#term?.ctl.release();
    this.#queue.close();
  }

  /** Same as `close()`, for `await using`. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  #begin(slot: Slot, fence: bigint, initial: Buffer): Term {
    let value = initial;
    const entry = {} as { ctl: LeaseController; term: Term };
    entry.ctl = this.#queue.lease(slot, fence, () => {
      if (this.#term === entry) this.#term = undefined;
    });
    const lease = entry.ctl.lease;
    const queue = this.#queue;
    const term: Term = Object.freeze({
      name: lease.name,
      fence: lease.fence,
      signal: lease.signal,
      key: slot.key,
      get value() {
        return value;
      },
      get lost() {
        return lease.lost;
      },
      get lostReason() {
        return lease.lostReason;
      },
      remainingMs: () => lease.remainingMs(),
      throwIfLost: () => lease.throwIfLost(),
      release: () => lease.release(),
      resign: () => lease.release(),
      [Symbol.asyncDispose]: () => lease[Symbol.asyncDispose](),
      proclaim: async (next: string | Buffer) => {
        const v = toValue('value', next);
        if (lease.lost) throw new NotLeaderError(`election ${this.name}: term ended; cannot proclaim`, { cause: lease.signal.reason });
        const res = await queue.txn([queue.ownerCompare(slot.keyBuf, slot.rev)], [{ request_put: { key: slot.keyBuf, value: v, lease: slot.epoch.leaseId } }], [], lease.signal);
        if (!res.succeeded) {
          entry.ctl.lose('expired', undefined, `election ${this.name}: leader key is gone`);
          throw new NotLeaderError(`election ${this.name}: no longer the leader; proclaim refused`);
        }
        value = v;
      },
    });
    entry.term = term;
    this.#term = entry;
    if (this.#closing.signal.aborted) void term.release();
    return term;
  }

  #checkOpen(): void {
    if (this.#closing.signal.aborted) throw new ClosedError(`election ${this.name}`);
    if (this.session.closed) throw new ClosedError(`election ${this.name}: session`);
  }
}
