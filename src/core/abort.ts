import { AcquireTimeoutError, ConfigError } from './errors.js';

/** The longest delay a Node timer takes (larger values fire at once). */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * AbortSignal helpers used wherever a wait can happen: check first, reject with `signal.reason`,
 * listeners added `{ once: true }` and removed in `finally`.
 */

/** Resolves after `ms`, or rejects with `signal.reason` as soon as `signal` aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  if (signal?.aborted) return Promise.reject(signal.reason);
  return new Promise<void>((resolve, reject) => {
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, Math.min(MAX_TIMER_MS, Math.max(0, ms)));
    signal?.addEventListener('abort', onAbort, { once: true });
  });
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
 * an {@link AcquireTimeoutError} naming `what`.
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
