import { setTimeout as delay } from 'node:timers/promises';
import { AcquireTimeoutError, ConfigError } from './errors.js';

/** The longest delay a Node timer takes (larger values fire at once). */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * AbortSignal helpers used wherever a wait can happen: check first, reject with `signal.reason`,
 * listeners added `{ once: true }` and removed in `finally`.
 */

/**
 * Resolves after `ms`, or rejects with `signal.reason` as soon as `signal` aborts: Node's
 * `timers/promises` timer, whose AbortError (reason as its `cause`) is unwrapped to the reason
 * itself, and whose delay is clamped (2^31 ms or more would fire at once).
 */
export async function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  try {
    await delay(Math.min(MAX_TIMER_MS, Math.max(0, ms)), undefined, { signal });
  } catch (e) {
    throw signal?.aborted ? signal.reason : e;
  }
}

/** Resolves after `ms` or as soon as `signal` aborts; never rejects (a poll's pause). */
export function sleepQuietly(ms: number, signal: AbortSignal): Promise<void> {
  return sleep(ms, signal).catch(() => undefined);
}

/**
 * Settles like `promise`, or rejects first with the reason of whichever of `a` and `b` aborts
 * (a wait's own signal and, say, its session's). The signals are heard through {@link onAbort} (a
 * Set per signal), not a listener added and removed per call: the requests of a lock cycle race the
 * same signals one after another (a session's signal is shared by every request in flight), and an
 * EventTarget's add and remove cost more than the rest of the race (10,000 latches on one session:
 * each add and remove linear in 10,000 listeners).
 */
export function raceSignal<T>(promise: Promise<T>, a?: AbortSignal, b?: AbortSignal): Promise<T> {
  if (!a && !b) return promise;
  const aborted = a?.aborted ? a : b?.aborted ? b : undefined;
  if (aborted) {
    promise.catch(() => undefined);
    return Promise.reject(aborted.reason);
  }
  return new Promise<T>((resolve, reject) => {
    const done = (f: () => void): void => {
      offA?.();
      offB?.();
      f();
    };
    const offA = a && onAbort(a, () => done(() => reject(a.reason)));
    const offB = b && onAbort(b, () => done(() => reject(b.reason)));
    promise.then(
      (v) => done(() => resolve(v)),
      (e: unknown) => done(() => reject(e)),
    );
  });
}

/**
 * True when `e` is what `signal` aborted with: a wait rejects with exactly `signal.reason` —
 * an Error, a string, the DOMException of a reason-less `abort()` — never wrapped.
 */
export function isAbortReason(e: unknown, signal: AbortSignal | undefined): boolean {
  return signal !== undefined && signal.aborted && e === signal.reason;
}

/**
 * Settles like `promise` within `ms`; after that rejects with `timeoutError()` (built only then),
 * or first with `signal.reason` if `signal` aborts. The one "race a call against a timer" of the
 * code base: the timer is always cleared. A rejection of `promise` after the race is lost is handled
 * (never an unhandled rejection). With `mapError`, every rejection (the call's own, the timeout's,
 * the signal's) settles as the promise `mapError` returns for it instead: what a `.catch` after the
 * race would do, without a promise layer more on the way of every answer.
 */
export function raceTimeout<T>(promise: Promise<T>, ms: number, timeoutError: () => unknown, signal?: AbortSignal, mapError?: (e: unknown) => Promise<never>): Promise<T> {
  if (signal?.aborted) {
    promise.catch(() => undefined);
    return mapError ? mapError(signal.reason) : Promise.reject(signal.reason);
  }
  // One promise and one place in a shared timer's queue, not a Promise.race of two inside an
  // async function: this runs twice in every Redis and Postgres lock cycle (a call and its
  // release; connect and COMMIT), where each promise layer and each Node timer is client work.
  // The signal is heard through onAbort, as raceSignal hears its own (a lock's calls race the
  // same signal one after another).
  return new Promise<T>((resolve, reject) => {
    let done = false;
    // (mapError runs for the first rejection only: a call that fails after the race was lost
    // must not leave a mapped rejection nobody awaits)
    const fail = (e: unknown): void => {
      if (done) return;
      done = true;
      if (mapError) resolve(mapError(e));
      else reject(e);
    };
    const settle = (): void => {
      cancel();
      off?.();
    };
    const cancel = afterMs(Math.min(MAX_TIMER_MS, Math.max(0, ms)), () => {
      off?.();
      fail(timeoutError());
    });
    const off =
      signal &&
      onAbort(signal, () => {
        cancel();
        fail(signal.reason);
      });
    promise.then(
      (v) => {
        settle();
        done = true;
        resolve(v);
      },
      (e: unknown) => {
        settle();
        fail(e);
      },
    );
  });
}

/** Waits at most `ms` for `promise` to settle (either way); true when it did. Never rejects. */
export async function settledWithin(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<false>((r) => (timer = setTimeout(() => r(false), Math.min(MAX_TIMER_MS, Math.max(0, ms)))));
  try {
    return await Promise.race([promise.then(() => true, () => true), late]);
  } finally {
    clearTimeout(timer);
  }
}

/** A subscriber of {@link onAbort}: a place in its signal's list (`list` undefined once it left or ran). */
interface AbortHook {
  readonly fn: () => void;
  prev: AbortHook | undefined;
  next: AbortHook | undefined;
  list: HookList | undefined;
}

interface HookList {
  head: AbortHook | undefined;
  tail: AbortHook | undefined;
}

const fanOut = new WeakMap<AbortSignal, HookList>();

/**
 * Calls `fn` once when `signal` aborts (not when it already has: check first), through one
 * listener per signal however many subscribe; returns the unsubscribe. For the session signals
 * every lease and request of a session hangs on: Node's EventTarget adds and removes a listener in
 * time linear in the listeners it has, so 10,000 leases on one session spent seconds in
 * addEventListener alone. The subscribers are a linked list, so joining and leaving are a few
 * pointer moves: a contended ZooKeeper grant joins and leaves some ten times.
 */
export function onAbort(signal: AbortSignal, fn: () => void): () => void {
  let list = fanOut.get(signal);
  if (!list) {
    const subscribers: HookList = { head: undefined, tail: undefined };
    fanOut.set(signal, (list = subscribers));
    signal.addEventListener(
      'abort',
      () => {
        fanOut.delete(signal);
        const due: (() => void)[] = [];
        for (let h = subscribers.head; h; h = h.next) {
          due.push(h.fn);
          h.list = undefined;
        }
        subscribers.head = subscribers.tail = undefined;
        for (const f of due) f();
      },
      { once: true },
    );
  }
  const hook: AbortHook = { fn, prev: list.tail, next: undefined, list };
  if (list.tail) list.tail.next = hook;
  else list.head = hook;
  list.tail = hook;
  return () => leave(hook);
}

function leave(hook: AbortHook): void {
  const list = hook.list;
  if (!list) return;
  hook.list = undefined;
  if (hook.prev) hook.prev.next = hook.next;
  else list.head = hook.next;
  if (hook.next) hook.next.prev = hook.prev;
  else list.tail = hook.prev;
  hook.prev = hook.next = undefined;
}

/** A {@link joinSignals} scope, which its owner can also abort itself. */
export interface JoinedSignals extends WaitScope {
  abort(reason: unknown): void;
}

/**
 * One signal that aborts, with the first reason, when `own` or `shared` does or when `abort` is
 * called; `dispose()` (in `finally`) unhooks it. `own` is a signal few listen to (a caller's),
 * heard through one EventTarget listener; `shared` one that thousands may hang on (a session's),
 * heard through {@link onAbort}. For the hot paths that combine the two: not `AbortSignal.any`,
 * whose weak references to its sources cost the garbage collector (1,000 etcd joins spent ~3 % of
 * their CPU in it, and more in GC), and one scope where a second source would otherwise need a
 * second combination.
 */
export function joinSignals(own: AbortSignal, shared: AbortSignal): JoinedSignals {
  const controller = new AbortController();
  const abort = (reason: unknown): void => controller.abort(reason);
  if (own.aborted || shared.aborted) {
    abort(own.aborted ? own.reason : shared.reason);
    return { signal: controller.signal, abort, dispose: () => undefined };
  }
  const onOwn = (): void => abort(own.reason);
  own.addEventListener('abort', onOwn, { once: true });
  const offShared = onAbort(shared, () => abort(shared.reason));
  return {
    signal: controller.signal,
    abort,
    dispose() {
      own.removeEventListener('abort', onOwn);
      offShared();
    },
  };
}

/** Resolves once `signal` aborts (at once when it already has). Never rejects. */
export function whenAborted(signal: AbortSignal): Promise<unknown> {
  if (signal.aborted) return Promise.resolve(signal.reason);
  return new Promise((resolve) => signal.addEventListener('abort', () => resolve(signal.reason), { once: true }));
}

export interface WaitScope {
  /** Aborts when the caller's signal aborts or the timeout passes (reason: AcquireTimeoutError). */
  readonly signal: AbortSignal;
  /** Clears the timer; call in `finally`. */
  dispose(): void;
}

/**
 * Combines a caller's `signal` and `timeoutMs` into one signal for a wait. The timeout's reason is
 * an {@link AcquireTimeoutError} naming `what`. Not `AbortSignal.any([signal,
 * AbortSignal.timeout(ms)])`: that timeout's reason is a DOMException, not the error a wait
 * promises, and its timer cannot be cleared, so every settled wait with a long `timeoutMs` would
 * keep one until it fired.
 */
export function waitScope(what: string, options: { signal?: AbortSignal | undefined; timeoutMs?: number | undefined } = {}): WaitScope {
  const { signal, timeoutMs } = options;
  // Node fires a timer of 2^31 ms or more at once: a bound that large would end the wait at once.
  if (timeoutMs !== undefined && (typeof timeoutMs !== 'number' || !(timeoutMs >= 0) || timeoutMs > MAX_TIMER_MS)) {
    throw new ConfigError('timeoutMs', `must be a number of ms in 0..${MAX_TIMER_MS}, got ${String(timeoutMs)}`);
  }
  if (signal !== undefined && !(signal instanceof AbortSignal)) {
    throw new ConfigError('signal', 'must be an AbortSignal');
  }
  const controller = new AbortController();
  const onAbort = (): void => controller.abort(signal?.reason);
  let timer: NodeJS.Timeout | undefined;
  if (signal?.aborted) controller.abort(signal.reason);
  else signal?.addEventListener('abort', onAbort, { once: true });
  if (timeoutMs !== undefined && !controller.signal.aborted) {
    timer = setTimeout(() => controller.abort(new AcquireTimeoutError(timeoutMs, what)), timeoutMs);
  }
  return {
    signal: controller.signal,
    dispose() {
      if (timer) clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
    },
  };
}

/** A place in a {@link BoundQueue}. */
interface Bound {
  /** performance.now() at which it fires. */
  readonly at: number;
  readonly fire: () => void;
  prev: Bound | undefined;
  next: Bound | undefined;
}

/**
 * Call bounds of one length on one Node timer. Bounds of equal length expire in the order they
 * were set, so a FIFO list holds them: setting and cancelling one is two pointer moves, not a Node
 * timer made and cleared (measured: a Node timer per call cost a Redis lock cycle ~2 % of its
 * rate, its timer list made and dropped each time). The timer stays armed for the head; it keeps
 * the process alive only while a bound is pending (unref'd when the list empties), and when it
 * fires early for a head cancelled since, it is armed again for the new head.
 */
class BoundQueue {
  readonly #ms: number;
  #head: Bound | undefined;
  #tail: Bound | undefined;
  #timer: NodeJS.Timeout | undefined;
  #refed = false;

  constructor(ms: number) {
    this.#ms = ms;
  }

  add(fire: () => void): Bound {
    const b: Bound = { at: performance.now() + this.#ms, fire, prev: this.#tail, next: undefined };
    if (this.#tail) this.#tail.next = b;
    else this.#head = b;
    this.#tail = b;
    if (!this.#timer) {
      this.#timer = setTimeout(this.#onTimer, Math.max(1, this.#ms));
      this.#refed = true;
    } else if (!this.#refed) {
      this.#timer.ref();
      this.#refed = true;
    }
    return b;
  }

  remove(b: Bound): void {
    if (b.prev) b.prev.next = b.next;
    else if (this.#head === b) this.#head = b.next;
    else return; // fired or removed already
    if (b.next) b.next.prev = b.prev;
    else this.#tail = b.prev;
    b.prev = b.next = undefined;
    if (!this.#head && this.#refed) {
      this.#timer?.unref();
      this.#refed = false;
    }
  }

  readonly #onTimer = (): void => {
    this.#timer = undefined;
    this.#refed = false;
    const now = performance.now();
    // Never early: a Node timer counts from its loop's cached time, which can lag this clock.
    while (this.#head && this.#head.at <= now) {
      const b = this.#head;
      this.remove(b);
      b.fire();
    }
    const head = this.#head;
    if (head && !this.#timer) {
      this.#timer = setTimeout(this.#onTimer, Math.max(1, Math.ceil(head.at - now)));
      this.#refed = true;
    } else if (!head && !this.#timer && boundQueues.get(this.#ms) === this) {
      boundQueues.delete(this.#ms); // idle for a whole bound: a length used once is not kept
    }
  };
}

/** The queue of each bound length in use (dropped once idle for a whole bound). */
const boundQueues = new Map<number, BoundQueue>();

/**
 * Calls `fire` after `ms` unless the returned function cancels it first: for bounds set often
 * with one length (a call's timeout), which share one Node timer (see {@link BoundQueue}).
 */
export function afterMs(ms: number, fire: () => void): () => void {
  let q = boundQueues.get(ms);
  if (!q) boundQueues.set(ms, (q = new BoundQueue(ms)));
  const queue = q;
  const b = queue.add(fire);
  return () => queue.remove(b);
}

/**
 * Calls `fire` at most `ms` from now (from 16 ms up, no earlier than 7/8 of it; below, after the
 * whole ms in it; never later than Node's timer limit) unless the returned function cancels it
 * first: {@link afterMs} for a delay that differs a little from call to call (the rest of a lease
 * until its next renew or its deadline), rounded down to one of a few lengths so such timers share
 * the queues of {@link afterMs} instead of each making and dropping a Node timer list. For a
 * caller that checks the time again when it fires (it may fire early).
 */
export function atMostMs(ms: number, fire: () => void): () => void {
  return afterMs(roundDown(ms), fire);
}

/** `ms` rounded down to a multiple of 1/8 to 1/16 of it (whole ms below 16). */
function roundDown(ms: number): number {
  if (!(ms >= 16)) return ms > 0 ? Math.floor(ms) : 0;
  const m = Math.min(ms, MAX_TIMER_MS);
  // 2^(⌊log2 m⌋ − 3), from the count of leading zero bits (m < 2^31)
  const step = 2 ** (28 - Math.clz32(m));
  return Math.floor(m / step) * step;
}
