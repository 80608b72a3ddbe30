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

/** Settles like `promise`, or rejects with `signal.reason` first if `signal` aborts. */
export function raceSignal<T>(promise: Promise<T>, signal?: AbortSignal): Promise<T> {
  if (!signal) return promise;
  if (signal.aborted) {
    promise.catch(() => undefined);
    return Promise.reject(signal.reason);
  }
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (v) => {
        signal.removeEventListener('abort', onAbort);
        resolve(v);
      },
      (e) => {
        signal.removeEventListener('abort', onAbort);
        reject(e);
      },
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
 * code base: the timer is always cleared.
 */
export async function raceTimeout<T>(promise: Promise<T>, ms: number, timeoutError: () => unknown, signal?: AbortSignal): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(timeoutError()), Math.min(MAX_TIMER_MS, Math.max(0, ms)));
  });
  try {
    return await raceSignal(Promise.race([promise, timeout]), signal);
  } finally {
    clearTimeout(timer);
  }
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

const fanOut = new WeakMap<AbortSignal, Set<() => void>>();

/**
 * Calls `fn` once when `signal` aborts (not when it already has: check first), through one
 * listener per signal however many subscribe; returns the unsubscribe. For the session signals
 * every lease of a session hangs on: Node's EventTarget adds and removes a listener in time linear
 * in the listeners it has, so 10,000 leases on one session spent seconds in addEventListener
 * alone; a Set is constant time.
 */
export function onAbort(signal: AbortSignal, fn: () => void): () => void {
  let set = fanOut.get(signal);
  if (!set) {
    const subscribers = new Set<() => void>();
    fanOut.set(signal, (set = subscribers));
    signal.addEventListener(
      'abort',
      () => {
        fanOut.delete(signal);
        for (const f of [...subscribers]) f();
        subscribers.clear();
      },
      { once: true },
    );
  }
  const entry = (): void => fn();
  set.add(entry);
  const subscribers = set;
  return () => void subscribers.delete(entry);
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
