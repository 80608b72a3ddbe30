import { monotonicClock, type Clock } from './clock.js';
import { ConfigError, LeaseLostError, type LeaseLostReason } from './errors.js';
import { optionalSignal, requireFunction, requireOptions, requireString } from './validate.js';

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
  /** Ends the lease at the store (owner-checked) and aborts `signal`. Idempotent. */
  release(): Promise<void>;
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
}

/**
 * Builds a {@link Lease} for a recipe and lets the recipe end it. Recipes hold the controller;
 * users only ever see `controller.lease`.
 */
export class LeaseController {
  readonly lease: Lease;
  readonly #abort = new AbortController();
  readonly #init: LeaseInit;
  readonly #clock: Clock;
  #releasing: Promise<void> | undefined;
  readonly #onParentAbort = (): void => {
    const reason = this.#init.parent?.reason;
    this.lose(reason instanceof LeaseLostError ? reason.reason : 'session-lost', reason);
  };

  constructor(init: LeaseInit) {
    requireOptions('init', init);
    requireString('name', init.name);
    if (typeof init.fence !== 'bigint') throw new ConfigError('fence', `must be a bigint, got ${typeof init.fence}`);
    requireFunction('release', init.release);
    if (init.deadline !== undefined) requireFunction('deadline', init.deadline);
    optionalSignal('parent', init.parent);
    this.#init = init;
    this.#clock = init.clock ?? monotonicClock;
    const checkDeadline = (): boolean => this.#checkDeadline();
    const abort = this.#abort;
    const lease: Lease = {
      name: init.name,
      fence: init.fence,
      signal: this.#abort.signal,
      get lost() {
        return checkDeadline();
      },
      get lostReason() {
        if (!checkDeadline()) return undefined;
        const r: unknown = abort.signal.reason;
        return r instanceof LeaseLostError ? r.reason : 'session-lost';
      },
      remainingMs: () => {
        if (this.#abort.signal.aborted) return 0;
        const d = init.deadline?.();
        return d === undefined ? Infinity : Math.max(0, d - this.#clock.now());
      },
      throwIfLost: () => {
        if (this.#checkDeadline()) throw this.#abort.signal.reason;
      },
      release: () => this.release(),
      [Symbol.asyncDispose]: () => this.release(),
    };
    this.lease = Object.freeze(lease);
    if (init.parent) {
      if (init.parent.aborted) this.#onParentAbort();
      else init.parent.addEventListener('abort', this.#onParentAbort, { once: true });
    }
  }

  /** True when the lease has ended (signal aborted). */
  get ended(): boolean {
    return this.#abort.signal.aborted;
  }

  /** Aborts the lease's signal with a {@link LeaseLostError}. No-op when already ended. */
  lose(reason: LeaseLostReason, cause?: unknown, message?: string): void {
    if (this.#abort.signal.aborted) return;
    this.#init.parent?.removeEventListener('abort', this.#onParentAbort);
    const make = (): LeaseLostError => new LeaseLostError(reason, message ?? `${this.#init.name}: lease lost (${reason})`, { cause, fence: this.#init.fence });
    const err = cause instanceof LeaseLostError && cause.reason === reason && message === undefined ? cause : reason === 'released' ? withoutStack(make) : make();
    this.#abort.abort(err);
  }

  /** Aborts the signal (reason `released`) and releases at the store once. */
  release(): Promise<void> {
    if (!this.#releasing) {
      this.lose('released', undefined, `${this.#init.name}: released`);
      this.#releasing = this.#init.release();
    }
    return this.#releasing;
  }

  #checkDeadline(): boolean {
    if (this.#abort.signal.aborted) return true;
    const d = this.#init.deadline?.();
    if (d !== undefined && this.#clock.now() >= d) {
      this.lose('deadline', undefined, `${this.#init.name}: local lease deadline passed`);
      return true;
    }
    return false;
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
