import type { ICompare } from 'etcd3';
import { waitScope } from '../../core/abort.js';
import { LeaseEmitter } from '../../core/lease-events.js';
import { BusyError, ClosedError, NotHeldError } from '../../core/errors.js';
import type { Lease, LeaseController } from '../../core/lease.js';
import { WAIT_KEYS, type WaitOptions } from '../../core/options.js';
import { optionalSignal, requireOptions } from '../../core/validate.js';
import { requireName, requireSession } from './names.js';
import { RevisionQueue, type QueueStats, type Slot } from './queue.js';
import type { EtcdSession } from './session.js';

/**
 * A FIFO-fair distributed mutex on etcd, like etcd's `concurrency.Mutex`, with a fence and a
 * signal. Waiters queue by `create_revision` and each watches only its predecessor. The held
 * {@link Lease}'s `signal` aborts when the session's lease is lost (etcd#6127: the Go mutex has
 * no way to say it is no longer held), and `fence` is the revision of the holder's claiming put
 * (for a holder that found nobody ahead, of the put that queued it).
 *
 * One mutex object is one participant: a second `acquire()` while it waits or holds rejects with
 * BusyError. One session holds at most one place per name; use one session per concurrent holder.
 */
export class EtcdMutex extends LeaseEmitter implements AsyncDisposable {
  /** The lock's name (its key prefix). */
  readonly name: string;
  /** The session whose lease the holder's key lives on. */
  readonly session: EtcdSession;
  readonly #queue: RevisionQueue;
  #held: { ctl: LeaseController; slot: Slot } | undefined;
  #busy = false;
  readonly #closing = new AbortController();

  constructor(session: EtcdSession, name: string) {
    super();
    this.session = requireSession(session);
    this.name = requireName('name', name);
    this.#queue = new RevisionQueue(this.session, this.name, `mutex ${this.name}`, { fenceAtEnqueue: true });
  }

  /** The key this session's current lease queues under: `<name>/<lease id hex>`. */
  get key(): string {
    return this.#queue.key;
  }

  /** Counters: predecessor watches and wake-ups (each release should wake exactly one waiter). */
  get stats(): Readonly<QueueStats> {
    return this.#queue.stats;
  }

  /** Waits for the lock in FIFO order and resolves with the held Lease. */
  async acquire(options?: WaitOptions): Promise<Lease> {
    const o = requireOptions('options', options, WAIT_KEYS);
    optionalSignal('signal', o.signal);
    this.#enter();
    const scope = waitScope(`mutex ${this.name}: acquire`, { signal: o.signal ? AbortSignal.any([o.signal, this.#closing.signal]) : this.#closing.signal, timeoutMs: o.timeoutMs });
    try {
      const got = await this.#queue.acquire(Buffer.alloc(0), scope.signal);
      const lease = this.#hold(got!.slot, got!.fence);
      if (scope.signal.aborted) {
        await lease.release().catch(() => undefined); // won just as the caller gave up
        throw scope.signal.reason;
      }
      return this.announce(lease);
    } finally {
      this.#busy = false;
      scope.dispose();
    }
  }

  /** Takes the lock only if nobody holds or waits for it; resolves undefined otherwise. */
  async tryAcquire(options?: WaitOptions): Promise<Lease | undefined> {
    const o = requireOptions('options', options, WAIT_KEYS);
    optionalSignal('signal', o.signal);
    this.#enter();
    const scope = waitScope(`mutex ${this.name}: tryAcquire`, { signal: o.signal ? AbortSignal.any([o.signal, this.#closing.signal]) : this.#closing.signal, timeoutMs: o.timeoutMs });
    try {
      const got = await this.#queue.acquire(Buffer.alloc(0), scope.signal, { tryOnly: true });
      return got ? this.announce(this.#hold(got.slot, got.fence)) : undefined;
    } finally {
      this.#busy = false;
      scope.dispose();
    }
  }

  /**
   * An etcd compare that holds only while this mutex is held by this session (its key still has
   * the create_revision it had when acquired). Add it to your own txns to fence writes to etcd:
   * `client.kv.txn({ compare: [mutex.isOwner()], success: [...] })`.
   * @throws NotHeldError when not held.
   */
  isOwner(): ICompare {
    if (!this.#held || this.#held.ctl.ended) throw new NotHeldError(`mutex ${this.name}: not held by this mutex`);
    return this.#queue.ownerCompare(this.#held.slot.keyBuf, this.#held.slot.rev);
  }

  /** The current Lease, if this mutex holds the lock. */
  get lease(): Lease | undefined {
    return this.#held && !this.#held.ctl.lease.lost ? this.#held.ctl.lease : undefined;
  }

  /** Releases a held lock (owner-checked) and refuses further use. Idempotent. */
  async close(): Promise<void> {
    if (!this.#closing.signal.aborted) this.#closing.abort(new ClosedError(`mutex ${this.name}`));
    await this.#held?.ctl.release();
    this.#queue.close();
  }

  /** Same as `close()`, for `await using`. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  #enter(): void {
    if (this.#closing.signal.aborted) throw new ClosedError(`mutex ${this.name}`);
    if (this.session.closed) throw new ClosedError(`mutex ${this.name}: session`);
    if (this.#busy || this.lease) throw new BusyError(`mutex ${this.name}: this mutex already waits or holds (one mutex object is one participant)`);
    this.#busy = true;
  }

  #hold(slot: Slot, fence: bigint): Lease {
    const entry = { slot } as { ctl: LeaseController; slot: Slot };
    entry.ctl = this.#queue.lease(slot, fence, () => {
      if (this.#held === entry) this.#held = undefined;
    });
    this.#held = entry;
    if (this.#closing.signal.aborted) void entry.ctl.release();
    return entry.ctl.lease;
  }
}
