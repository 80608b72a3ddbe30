import { LeaseEmitter } from '../../core/lease-events.js';
import { waitScope } from '../../core/abort.js';
import { validateAcl, type ClientAcl, type ZkAcl } from './acl.js';
import type { LeaderInfo } from '../../core/candidate.js';
import { BusyError } from '../../core/errors.js';
import type { Lease, LeaseController } from '../../core/lease.js';
import { WAIT_KEYS, type WaitOptions } from '../../core/options.js';
import { optionalId, optionalSignal, requireOptions } from '../../core/validate.js';
import { StandardLockDriver, type LockDriver } from './drivers.js';
import { CloseGuard, requireSession } from './guard.js';
import { LockInternals } from './internals.js';
import { readLeader, readParticipants, type Participant } from './leader.js';
import { validatePath } from './paths.js';
import type { ZkSession } from './session.js';

/** Options of an {@link InterProcessMutex}. */
export interface InterProcessMutexOptions {
  /** This participant's id, stored in its node; what `holder()` shows. @default a random UUID */
  id?: string;
  /** The ACL of the nodes this lock creates (e.g. `[digestAcl(user, password)]`). @default the session's `acl` */
  acl?: ZkAcl[];
}

/**
 * A lock on a ZooKeeper queue (the base of the mutex and of both sides of the read/write lock).
 * One lock object is one participant: `acquire()` while it already waits or holds rejects with
 * BusyError (Node has no threads to own a lock, so there is no re-entrancy: two tasks that must
 * exclude each other use two objects).
 */
export class InterProcessLock extends LeaseEmitter implements AsyncDisposable {
  /** The lock's path (its queue's parent node). */
  readonly path: string;
  /** This participant's id (its node's data). */
  readonly id: string;
  readonly #session: ZkSession;
  readonly #internals: LockInternals;
  readonly #driver: () => LockDriver;
  readonly #guard: CloseGuard;
  #held: LeaseController | undefined;
  #busy = false;
  #ourPath: string | undefined;
  /** The node data: the id (read, never changed, by each create). */
  readonly #data: Buffer;

  /** @internal */
  constructor(session: ZkSession, path: string, driver: () => LockDriver, what: string, id: string, acl?: ClientAcl[]) {
    super();
    this.#session = requireSession(session);
    this.path = validatePath('path', path);
    this.id = id;
    this.#data = Buffer.from(id);
    this.#internals = new LockInternals(this.#session, this.path, acl ?? this.#session.acl);
    this.#driver = driver;
    this.#guard = new CloseGuard(`${what} ${this.path}`);
  }

  /**
   * Waits for the lock and resolves with a {@link Lease}: `fence` is the holder node's czxid,
   * `signal` aborts on SUSPENDED (standard policy), LOST, the local deadline, or release.
   */
  async acquire(options?: WaitOptions): Promise<Lease> {
    return (await this.#take(options, false))!;
  }

  /**
   * Takes the lock only if this object's node is first at once; resolves undefined otherwise (its
   * node deleted). Never waits on a silent server: past the session's `callTimeoutMs` without a
   * reply it rejects with StoreUnavailableError.
   */
  tryAcquire(options?: WaitOptions): Promise<Lease | undefined> {
    return this.#take(options, true);
  }

  async #take(options: WaitOptions | undefined, tryOnly: boolean): Promise<Lease | undefined> {
    const o = requireOptions('options', options, WAIT_KEYS);
    optionalSignal('signal', o.signal);
    this.#guard.throwIfClosed();
    if (this.#busy || this.lease) throw new BusyError(`${this.#guard.what}: this lock object already waits or holds (one object is one participant)`);
    this.#busy = true;
    // Without a timeout the scope would only copy the joined signal (one AbortController per
    // acquire, a visible share of a contended grant's client work): the wait races that signal.
    const joined = this.#guard.join(o.signal);
    const scope = o.timeoutMs === undefined ? undefined : waitScope(`${this.#guard.what}: ${tryOnly ? 'tryAcquire' : 'acquire'}`, { signal: joined, timeoutMs: o.timeoutMs });
    const signal = scope?.signal ?? joined;
    try {
      const data = this.#data;
      const queued = (p: string): void => void (this.#ourPath = p);
      const held = tryOnly ? await this.#internals.acquire(this.#driver(), signal, data, queued, true) : await this.#internals.acquire(this.#driver(), signal, data, queued);
      if (!held) {
        this.#ourPath = undefined;
        return undefined;
      }
      const ctl: LeaseController = this.#internals.lease(this.path, held, () => {
        if (this.#held !== ctl) return;
        this.#held = undefined;
        this.#ourPath = undefined;
      });
      this.#held = ctl;
      if (signal.aborted) {
        await this.#internals.giveBack(ctl); // won just as the caller gave up
        throw signal.reason;
      }
      return this.announce(ctl.lease);
    } catch (e) {
      this.#ourPath = undefined;
      throw e;
    } finally {
      this.#busy = false;
      scope?.dispose();
    }
  }

  /** Full path of this object's node, while it waits or holds. */
  get ourPath(): string | undefined {
    return this.#ourPath;
  }

  /** The held Lease, while this object holds the lock. */
  get lease(): Lease | undefined {
    return this.#held && !this.#held.lease.lost ? this.#held.lease : undefined;
  }

  /** Who holds the lock (id and fence), or undefined when nobody does. */
  async holder(options?: WaitOptions): Promise<LeaderInfo | undefined> {
    this.#guard.throwIfClosed();
    const scope = waitScope(`${this.#guard.what}: holder`, { signal: this.#guard.join(optionalSignal('signal', requireOptions('options', options, WAIT_KEYS).signal)), timeoutMs: options?.timeoutMs });
    try {
      return await readLeader(this.#session, this.path, this.#driver().queueNames, scope.signal);
    } finally {
      scope.dispose();
    }
  }

  /** Every queued participant, the holder first. */
  participants(): Promise<Participant[]> {
    this.#guard.throwIfClosed();
    return readParticipants(this.#session, this.path, this.#driver().queueNames);
  }

  /** Aborts a pending acquire, releases what this object holds. Idempotent. */
  async close(): Promise<void> {
    if (!this.#guard.close()) return;
    await this.#held?.release();
  }

  /** Same as `close()`, for `await using`. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }
}

/**
 * A distributed mutex (Curator's InterProcessMutex, same node layout `…/_c_<guid>-lock-<seq>`):
 * a FIFO queue of ephemeral sequential nodes under `path`; each waiter watches only its
 * predecessor. One object is one participant (see {@link InterProcessLock}).
 */
export class InterProcessMutex extends InterProcessLock {
  constructor(session: ZkSession, path: string, options?: InterProcessMutexOptions) {
    const driver = new StandardLockDriver();
    const o = requireOptions('options', options, { id: true, acl: true });
    super(session, path, () => driver, 'mutex', optionalId(o.id), validateAcl(o.acl));
  }
}
