import { atMostMs, onAbort } from './abort.js';
import { monotonicClock, type Clock } from './clock.js';
import { ConfigError, LeaseLostError, type LeaseLostReason } from './errors.js';
import { silentLogger, type Logger } from './options.js';
import { optionalSignal, requireFunction, requireObject, requireString } from './validate.js';

/**
 * A lock or a leadership term. It ends when the store says so, not when the holder thinks so:
 * `signal` aborts the moment the lease is lost *or may be lost*, and `fence` goes with every
 * write to a fenced resource so a holder that missed the end is still refused.
 */
export interface Lease extends AsyncDisposable {
  /** The lock or election name this lease is for. */
  readonly name: string;
  /** Fencing token: strictly increasing across successive holders of the same name. */
  readonly fence: bigint;
  /**
   * Aborts when the lease is lost, may be lost, or is released. Its `reason` is a
   * {@link LeaseLostError} saying why. Pass it to every call made on the lease's behalf.
   */
  readonly signal: AbortSignal;
  /** True once `signal` has aborted or the local deadline has passed. */
  readonly lost: boolean;
  /** Why the lease ended (`'deadline'`, `'expired'`, `'released'`, …); undefined while it lives. */
  readonly lostReason: LeaseLostReason | undefined;
  /**
   * Milliseconds left before the local deadline on the monotonic clock (Infinity when the store
   * drives the end alone, e.g. a Postgres connection-bound lock). Never negative.
   */
  remainingMs(): number;
  /**
   * Throws the {@link LeaseLostError} if the lease is lost, checking the local deadline
   * synchronously on the monotonic clock (no I/O): call it right before a side effect.
   */
  throwIfLost(): void;
  /**
   * Ends the lease at the store (owner-checked) and aborts `signal`. Idempotent. A lease that is
   * already lost (its signal aborted, or its local deadline passed) is not waited for: the store
   * ends it by itself, so `release()` resolves at once and the cleanup (freeing the name early, if
   * the store can still be reached) goes on in the background, bounded by the backend's call
   * bound and reported through its logger. A live lease's release rejects when the store does not
   * confirm it (e.g. StoreUnavailableError after `callTimeoutMs`).
   */
  release(): Promise<void>;
  /**
   * What `await using` calls when the block is left: `release()`, best-effort. It never throws,
   * so it never replaces the block's own result or error: a release the store did not confirm
   * (a dead or partitioned store) is reported through the backend's logger (warn) and the lease
   * ends anyway — the store frees the name at the TTL, and the fence refuses any write made
   * under it from then on.
   */
  [Symbol.asyncDispose](): Promise<void>;
}

export interface LeaseInit {
  /** The lock or election name. */
  name: string;
  /** The fence of this acquisition. */
  fence: bigint;
  /**
   * Releases the lease at the store, owner-checked. Called at most once. Its failure rejects
   * `release()`.
   */
  release: () => Promise<void>;
  /**
   * The local deadline, in the clock's milliseconds, past which the lease must be assumed lost;
   * read on every check. Supplied by the session that owns liveness. Omit when the store alone
   * ends the lease (a connection-bound lock).
   */
  deadline?: () => number;
  /** The owning session's signal: when it aborts, so does the lease. */
  parent?: AbortSignal;
  /** @default monotonicClock */
  clock?: Clock;
  /** Where a failed background cleanup or a failed release at `await using` is reported. @default silent */
  logger?: Logger;
}

/**
 * Builds a {@link Lease} for a recipe and lets the recipe end it. Recipes hold the controller;
 * users only ever see `controller.lease`.
 */
export class LeaseController {
  readonly lease: Lease;
  /**
   * The signal's controller, made when `lease.signal` is first read: an AbortController, a
   * LeaseLostError and their listeners are most of a lease's client work in a lock cycle whose
   * holder never reads the signal (measured: 43 µs of a ~150 µs Postgres cycle), so they are made
   * on demand. Observably the same: a signal first read after the end is already aborted, with
   * the same reason.
   */
  #abort: AbortController | undefined;
  /** How the lease ended, once it has. */
  #end: { reason: LeaseLostReason; cause: unknown; message: string | undefined; error?: LeaseLostError } | undefined;
  /** {@link onEnd} callbacks registered while the signal was not yet made, in order. */
  #hooks: (() => void)[] | undefined;
  readonly #init: LeaseInit;
  readonly #clock: Clock;
  readonly #logger: Logger;
  #releasing: Promise<void> | undefined;
  #offParent: (() => void) | undefined;
  readonly #onParentAbort = (): void => {
    const reason = this.#init.parent?.reason;
    this.lose(reason instanceof LeaseLostError ? reason.reason : 'session-lost', reason);
  };

  constructor(init: LeaseInit) {
    requireObject('init', init);
    requireString('name', init.name);
    if (typeof init.fence !== 'bigint') throw new ConfigError('fence', `must be a bigint, got ${typeof init.fence}`);
    requireFunction('release', init.release);
    if (init.deadline !== undefined) requireFunction('deadline', init.deadline);
    optionalSignal('parent', init.parent);
    this.#init = init;
    this.#clock = init.clock ?? monotonicClock;
    this.#logger = init.logger ?? silentLogger();
    this.lease = new LeaseHandle(this, init.name, init.fence);
    if (init.parent) {
      // (through onAbort: thousands of leases hang on one session's signal)
      if (init.parent.aborted) this.#onParentAbort();
      else this.#offParent = onAbort(init.parent, this.#onParentAbort);
    }
  }

  /** The lease's signal (made now if it was not yet: see `#abort`). */
  get signal(): AbortSignal {
    if (this.#abort) return this.#abort.signal;
    const abort = (this.#abort = new AbortController());
    // The hooks registered so far run first, as listeners registered before any reader's.
    for (const h of this.#hooks ?? []) abort.signal.addEventListener('abort', h, { once: true });
    this.#hooks = undefined;
    if (this.#end) abort.abort(this.endError);
    return abort.signal;
  }

  /** @internal The lease's `remainingMs()`. */
  remainingMs(): number {
    if (this.#end) return 0;
    const d = this.#init.deadline?.();
    return d === undefined ? Infinity : Math.max(0, d - this.#clock.now());
  }


  /** @internal Where the lease's emitter hears failures no caller awaits (set by the emitter that announced it). */
  errorSink: ((error: unknown) => void) | undefined;

  /** True when the lease has ended (signal aborted). */
  get ended(): boolean {
    return this.#end !== undefined;
  }

  /** Why the lease ended (`lostReason` without the deadline check); undefined while it lives. */
  get endReason(): LeaseLostReason | undefined {
    return this.#end?.reason;
  }

  /** The signal's reason once the lease has ended: the {@link LeaseLostError} (made on first use). */
  get endError(): LeaseLostError | undefined {
    const end = this.#end;
    if (!end) return undefined;
    if (!end.error) {
      const { reason, cause, message } = end;
      const make = (): LeaseLostError => new LeaseLostError(reason, message ?? `${this.#init.name}: lease lost (${reason})`, { cause, fence: this.#init.fence });
      end.error = cause instanceof LeaseLostError && cause.reason === reason && message === undefined ? cause : reason === 'released' ? withoutStack(make) : make();
    }
    return end.error;
  }

  /**
   * Runs `fn` once when the lease ends, in order with the signal's own abort listeners (as if it
   * were one, registered now), without making the signal. Runs it on a microtask when the lease
   * has ended already. For the recipes' and the emitter's own clean-up.
   */
  onEnd(fn: () => void): void {
    if (this.#end) queueMicrotask(fn);
    else if (this.#abort) this.#abort.signal.addEventListener('abort', fn, { once: true });
    else (this.#hooks ??= []).push(fn);
  }

  /** Aborts the lease's signal with a {@link LeaseLostError}. No-op when already ended. */
  lose(reason: LeaseLostReason, cause?: unknown, message?: string): void {
    if (this.#end) return;
    this.#offParent?.();
    this.#end = { reason, cause, message };
    if (this.#abort) {
      this.#abort.abort(this.endError);
      return;
    }
    const hooks = this.#hooks;
    this.#hooks = undefined;
    for (const h of hooks ?? []) h();
  }

  /**
   * Aborts the signal (reason `released`) and releases at the store once. Waits on the store only
   * while the lease may still be live there: a lease already lost (or past its local deadline)
   * resolves at once, and a live one resolves when its local deadline passes or its session is
   * lost before the store has answered. From then on the store frees the name by itself (at its
   * TTL), and waiting on a store that may be unreachable would only hold up the holder (its
   * `onDemoted`, its next campaign, the end of an `await using` block). The cleanup still runs,
   * in the background, bounded by the recipe's own call bound; its failure is logged, not thrown.
   */
  release(): Promise<void> {
    if (!this.#releasing) {
      const lost = this.checkDeadline();
      this.lose('released', undefined, `${this.#init.name}: released`);
      const atStore = this.#init.release();
      if (lost) {
        this.#inBackground(atStore, 'cleanup of a lost lease did not reach the store; the store ends it at its TTL');
        this.#releasing = Promise.resolve();
      } else {
        this.#releasing = this.#init.deadline || this.#init.parent ? this.#whileLive(atStore) : atStore;
      }
    }
    return this.#releasing;
  }

  /**
   * `atStore`, or undefined once the lease's local deadline passes or its session is lost first.
   * One promise and at most one place on a shared timer (this runs in every lock cycle).
   */
  #whileLive(atStore: Promise<void>): Promise<void> {
    const { deadline, parent } = this.#init;
    return new Promise<void>((resolve, reject) => {
      let cancel: (() => void) | undefined;
      let offGone: (() => void) | undefined;
      let settled = false;
      const settle = (): boolean => {
        if (settled) return false;
        settled = true;
        cancel?.();
        offGone?.();
        return true;
      };
      const gone = (): void => {
        if (!settle()) return;
        this.#inBackground(atStore, 'release did not reach the store before the lease ended; the store ends it at its TTL');
        resolve();
      };
      const check = (): void => {
        const left = deadline ? deadline() - this.#clock.now() : Infinity;
        if (left <= 0) gone();
        // (a shared timer, which may fire early: check again then; it clamps to Node's timer limit)
        else if (left !== Infinity) cancel = atMostMs(left, check);
      };
      if (parent?.aborted) return gone();
      if (parent) offGone = onAbort(parent, gone);
      check();
      atStore.then(
        () => settle() && resolve(),
        (e: unknown) => settle() && reject(e),
      );
    });
  }

  #inBackground(atStore: Promise<void>, message: string): void {
    atStore.catch((e: unknown) => {
      this.#logger.warn({ err: e, fence: String(this.#init.fence) }, message);
      this.errorSink?.(e);
    });
  }

  /** `await using`: `release()`, reporting a failure through the logger instead of throwing it. */
  async dispose(): Promise<void> {
    try {
      await this.release();
    } catch (e) {
      this.#logger.warn({ err: e, fence: String(this.#init.fence) }, 'release at the end of an await using block failed; the lease has ended here and the store ends it at its TTL');
      this.errorSink?.(e);
    }
  }

  /** @internal The lease's `lost`: ended, or past the local deadline (which ends it now). */
  checkDeadline(): boolean {
    if (this.#end) return true;
    const d = this.#init.deadline?.();
    if (d !== undefined && this.#clock.now() >= d) {
      this.lose('deadline', undefined, `${this.#init.name}: local lease deadline passed`);
      return true;
    }
    return false;
  }
}

/**
 * The {@link Lease} a controller hands out: a class instance, not an object literal — a literal
 * with getters and closures cost ~7 µs to make, a class instance well under one, in a lock cycle
 * whose whole client work is tens of µs. Frozen, like the literal was.
 */
class LeaseHandle implements Lease {
  readonly #ctl: LeaseController;
  readonly name: string;
  readonly fence: bigint;

  constructor(ctl: LeaseController, name: string, fence: bigint) {
    this.#ctl = ctl;
    this.name = name;
    this.fence = fence;
    Object.freeze(this);
  }

  /** The controller of `lease`, when it is one of theirs. */
  static controllerOf(lease: Lease): LeaseController | undefined {
    return #ctl in lease ? (lease as LeaseHandle).#ctl : undefined;
  }

  get signal(): AbortSignal {
    return this.#ctl.signal;
  }

  get lost(): boolean {
    return this.#ctl.checkDeadline();
  }

  get lostReason(): LeaseLostReason | undefined {
    return this.#ctl.checkDeadline() ? this.#ctl.endReason : undefined;
  }

  remainingMs(): number {
    return this.#ctl.remainingMs();
  }

  throwIfLost(): void {
    if (this.#ctl.checkDeadline()) throw this.#ctl.endError;
  }

  release(): Promise<void> {
    return this.#ctl.release();
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.#ctl.dispose();
  }
}

/** The controller of `lease` when a {@link LeaseController} made it. @internal */
export const controllerOf = (lease: Lease): LeaseController | undefined => LeaseHandle.controllerOf(lease);

/**
 * `fn` once `lease` ends, and how it ended (`released`, or the LeaseLostError), without making its
 * signal when the lease is a {@link LeaseController}'s; on the signal otherwise.
 */
export function onLeaseEnd(lease: Lease, fn: (reason: LeaseLostReason | undefined, error: () => unknown) => void): void {
  const ctl = LeaseHandle.controllerOf(lease);
  if (ctl?.ended) fn(ctl.endReason, () => ctl.endError);
  else if (ctl) ctl.onEnd(() => fn(ctl.endReason, () => ctl.endError));
  else {
    const ended = (): void => {
      const r: unknown = lease.signal.reason;
      fn(r instanceof LeaseLostError ? r.reason : undefined, () => r);
    };
    if (lease.signal.aborted) ended();
    else lease.signal.addEventListener('abort', ended, { once: true });
  }
}

/**
 * Builds an error without capturing a stack trace. A released lease's reason (or a closed
 * session's) is the normal end of every lock cycle, not a fault, and capturing a stack costs
 * ~20 µs: a tenth of a whole Postgres xact-lock cycle on loopback.
 */
export function withoutStack<T>(make: () => T): T {
  const limit = Error.stackTraceLimit;
  Error.stackTraceLimit = 0;
  try {
    return make();
  } finally {
    Error.stackTraceLimit = limit;
  }
}
