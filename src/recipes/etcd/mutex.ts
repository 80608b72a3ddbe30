import type { ICompare } from 'etcd3';
import { waitScope } from '../../core/abort.js';
import { ClosedError, NotLeaderError } from '../../core/errors.js';
import type { Lease, LeaseController } from '../../core/lease.js';
import { optionalSignal, requireOptions } from '../../core/validate.js';
import { requireName, requireSession } from './names.js';
import { RevisionQueue, type QueueStats } from './queue.js';
import type { EtcdSession } from './session.js';

export interface EtcdMutexAcquireOptions {
  /** Aborts the wait; the queued key is removed. */
  signal?: AbortSignal;
  /** Gives up after this many ms with AcquireTimeoutError; the queued key is removed. */
  timeoutMs?: number;
}

/**
 * A FIFO-fair distributed mutex on etcd, like etcd's `concurrency.Mutex`, with a fence and a
 * signal. Waiters queue by `create_revision` and each watches only its predecessor. The held
 * {@link Lease}'s `signal` aborts when the session is lost (etcd#6127: the Go mutex has no way
 * to say it is no longer held), and `fence` is the revision of the holder's claiming put.
 *
 * One session holds at most one place per name; use one session per concurrent holder.
 */
export class EtcdMutex implements AsyncDisposable {
  readonly name: string;
  readonly session: EtcdSession;
  readonly #queue: RevisionQueue;
  #held: { ctl: LeaseController; rev: bigint } | undefined;
  #closed = false;

  constructor(session: EtcdSession, name: string) {
    this.session = requireSession(session);
    this.name = requireName('name', name);
    this.#queue = new RevisionQueue(this.session, this.name, `mutex ${this.name}`);
  }

  /** The key this session queues under: `<name>/<lease id hex>`. */
  get key(): string {
    return this.#queue.key;
  }

  /** Counters: predecessor watches and wake-ups (each release should wake exactly one waiter). */
  get stats(): Readonly<QueueStats> {
    return this.#queue.stats;
  }

  /** Waits for the lock in FIFO order and resolves with the held Lease. */
  async acquire(options?: EtcdMutexAcquireOptions): Promise<Lease> {
    const o = requireOptions('options', options);
    optionalSignal('signal', o.signal);
    this.#checkOpen();
    const scope = waitScope(`mutex ${this.name}: acquire`, { signal: o.signal, timeoutMs: o.timeoutMs });
    try {
      const got = await this.#queue.acquire(Buffer.alloc(0), scope.signal);
      return this.#hold(got!.slot, got!.fence);
    } finally {
      scope.dispose();
    }
  }

  /** Takes the lock only if nobody holds or waits for it; resolves undefined otherwise. */
  async tryAcquire(options?: { signal?: AbortSignal }): Promise<Lease | undefined> {
    const o = requireOptions('options', options);
    const signal = optionalSignal('signal', o.signal) ?? new AbortController().signal;
    this.#checkOpen();
    const got = await this.#queue.acquire(Buffer.alloc(0), signal, { tryOnly: true });
    return got ? this.#hold(got.slot, got.fence) : undefined;
  }

  /**
   * An etcd compare that holds only while this mutex is held by this session (its key still has
   * the create_revision it had when acquired). Add it to your own txns to fence writes to etcd:
   * `client.kv.txn({ compare: [mutex.isOwner()], success: [...] })`.
   * @throws NotLeaderError when not held.
   */
  isOwner(): ICompare {
    if (!this.#held || this.#held.ctl.ended) throw new NotLeaderError(`mutex ${this.name}: not held by this session`);
    return this.#queue.ownerCompare(this.#held.rev);
  }

  /** The current Lease, if this mutex holds the lock. */
  get lease(): Lease | undefined {
    return this.#held && !this.#held.ctl.ended ? this.#held.ctl.lease : undefined;
  }

  /** Releases a held lock (owner-checked) and refuses further use. Idempotent. */
  async close(): Promise<void> {
    this.#closed = true;
    await this.#held?.ctl.release();
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  #hold(slot: Parameters<RevisionQueue['lease']>[1], fence: bigint): Lease {
    const entry = { rev: slot.rev } as { ctl: LeaseController; rev: bigint };
    entry.ctl = this.#queue.lease(this.name, slot, fence, () => {
      if (this.#held === entry) this.#held = undefined;
    });
    this.#held = entry;
    if (this.#closed) void entry.ctl.release();
    return entry.ctl.lease;
  }

  #checkOpen(): void {
    if (this.#closed) throw new ClosedError(`mutex ${this.name}`);
    this.session.throwIfLost(`mutex ${this.name}`);
  }
}
