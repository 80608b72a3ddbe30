import { raceSignal, waitScope } from '../../core/abort.js';
import { TenureError } from '../../core/errors.js';
import { LeaseController, type Lease } from '../../core/lease.js';
import { optionalSignal, requireOptions } from '../../core/validate.js';
import { StandardLockDriver, type LockDriver } from './drivers.js';
import { CloseGuard, requireSession } from './guard.js';
import { LockInternals, type HeldNode } from './internals.js';
import { validatePath } from './paths.js';
import type { ZkSession } from './session.js';

export interface AcquireOptions {
  /** Aborts the wait; the queued node is deleted before the promise rejects with its reason. */
  signal?: AbortSignal;
  /** Gives up after this long with an AcquireTimeoutError. @default no limit */
  timeoutMs?: number;
}

interface Holding {
  readonly held: HeldNode;
  master: LeaseController;
  count: number;
  /** Leases handed out and not yet released, newest last (for `release()` on the lock). */
  readonly open: Lease[];
}

/**
 * A reentrant lock on a ZooKeeper queue (the base of the mutex and the read/write locks).
 *
 * **Owner** (Node has no threads): the owner is the lock *object*. A second `acquire()` on the
 * same object while it holds succeeds at once with the same fence (reentrancy); the node is
 * deleted when every lease it handed out is released. Concurrent `acquire()` calls on one object
 * are served one after the other. To exclude each other, two tasks in one process use two
 * objects.
 */
export class ReentrantZkLock implements AsyncDisposable {
  readonly path: string;
  readonly #session: ZkSession;
  readonly #internals: LockInternals;
  readonly #driver: () => LockDriver;
  readonly #guard: CloseGuard;
  #holding: Holding | undefined;
  #turn: Promise<void> = Promise.resolve();
  readonly #data: Buffer | undefined;

  /** @internal */
  constructor(session: ZkSession, path: string, driver: () => LockDriver, what: string, data?: Buffer) {
    this.#data = data;
    this.#session = requireSession(session);
    this.path = validatePath('path', path);
    this.#internals = new LockInternals(this.#session, this.path);
    this.#driver = driver;
    this.#guard = new CloseGuard(`${what} ${this.path}`);
  }

  /**
   * Waits for the lock and resolves with a {@link Lease}: `fence` is the holder node's czxid,
   * `signal` aborts on SUSPENDED (standard policy), LOST, the local deadline, or release.
   */
  async acquire(options?: AcquireOptions): Promise<Lease> {
    const o = requireOptions('options', options);
    optionalSignal('signal', o.signal);
    this.#guard.throwIfClosed();
    const scope = waitScope(`${this.#guard.what}: acquire`, { signal: this.#guard.join(o.signal), timeoutMs: o.timeoutMs });
    const before = this.#turn;
    let done!: () => void;
    this.#turn = new Promise<void>((r) => (done = r));
    try {
      await raceSignal(before, scope.signal);
      const h = this.#holding;
      if (h && !h.master.ended) {
        h.count++;
        return this.#subLease(h);
      }
      const held = await this.#internals.acquire(this.#driver(), scope.signal, this.#data ?? Buffer.from(this.#session.sessionId ?? ''));
      const holding: Holding = { held, master: undefined as unknown as LeaseController, count: 1, open: [] };
      holding.master = this.#internals.lease(this.path, held, () => {
        if (this.#holding === holding) this.#holding = undefined;
      });
      this.#holding = holding;
      return this.#subLease(holding);
    } finally {
      scope.dispose();
      done();
    }
  }

  #subLease(h: Holding): Lease {
    let released = false;
    const ctl = new LeaseController({
      name: this.path,
      fence: h.held.fence,
      parent: h.master.lease.signal,
      deadline: () => this.#session.deadline(),
      clock: this.#session.clock,
      release: async () => {
        if (released) return;
        released = true;
        h.count--;
        const i = h.open.indexOf(ctl.lease);
        if (i >= 0) h.open.splice(i, 1);
        if (h.count === 0) await h.master.release();
      },
    });
    h.open.push(ctl.lease);
    return ctl.lease;
  }

  /**
   * Releases this object's most recent hold (Curator's `release()`); same as releasing that
   * Lease. Throws a TenureError when this object holds nothing.
   */
  async release(): Promise<void> {
    const lease = this.#holding?.open.at(-1);
    if (!lease) throw new TenureError(`${this.#guard.what}: not held by this object`);
    await lease.release();
  }

  /** True while this object holds the lock (and its lease is not lost). */
  isAcquiredInThisProcess(): boolean {
    return this.#holding !== undefined && !this.#holding.master.ended;
  }

  /** The full path of the node this object holds with, if any. */
  get ourPath(): string | undefined {
    return this.#holding?.held.path;
  }

  /** Every queued node's full path, holder first. */
  getParticipantNodes(): Promise<string[]> {
    this.#guard.throwIfClosed();
    return this.#internals.participants(this.#driver().queueNames);
  }

  /** Aborts pending acquires, releases what this object holds. Idempotent. */
  async close(): Promise<void> {
    if (!this.#guard.close()) return;
    await this.#holding?.master.release();
    this.#holding = undefined;
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }
}

/**
 * A distributed mutex (Curator's InterProcessMutex): a FIFO queue of ephemeral sequential nodes
 * under `path`; each waiter watches only its predecessor. Reentrant per object (see
 * {@link ReentrantZkLock}).
 */
export class InterProcessMutex extends ReentrantZkLock {
  /** `data` is stored in the node (e.g. a participant id). @default the session id */
  constructor(session: ZkSession, path: string, data?: Buffer) {
    const driver = new StandardLockDriver();
    super(session, path, () => driver, 'mutex', data);
  }
}
