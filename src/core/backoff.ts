import { performance } from 'node:perf_hooks';
import { ExponentialBackoff, type IBackoff } from 'cockatiel';
import { sleep } from './abort.js';
import { ConfigError } from './errors.js';
import { optionalNumber, requireOptions } from './validate.js';

/**
 * The one backoff policy: cockatiel's exponential backoff with decorrelated jitter (AWS's
 * "exponential backoff and jitter"; Polly's default), so retrying participants spread out instead
 * of retrying in step. Every loop in tenure that retries or re-tries waits through it.
 */
export interface BackoffOptions {
  /** First delay in ms. @default 50 */
  initialMs?: number;
  /** Largest delay in ms. @default 1000 */
  maxMs?: number;
}

/** Validated backoff bounds. */
export function backoffOptions(value: BackoffOptions | undefined, field = 'backoff', defaults: Required<BackoffOptions> = { initialMs: 50, maxMs: 1000 }): Required<BackoffOptions> {
  if (value !== undefined && (value === null || typeof value !== 'object')) throw new ConfigError(field, 'must be an object { initialMs, maxMs }');
  requireOptions(field, value, { initialMs: true, maxMs: true });
  const initialMs = optionalNumber(`${field}.initialMs`, value?.initialMs, defaults.initialMs, { min: 1, max: 2 ** 31 - 1 });
  const maxMs = optionalNumber(`${field}.maxMs`, value?.maxMs, Math.max(defaults.maxMs, initialMs), { min: 1, max: 2 ** 31 - 1 });
  if (maxMs < initialMs) throw new ConfigError(`${field}.maxMs`, `must be at least initialMs (${initialMs}), got ${maxMs}`);
  return { initialMs, maxMs };
}

/** Successive jittered delays; `reset()` after a success starts again from the first. */
export class Backoff {
  readonly #factory: ExponentialBackoff<unknown>;
  #current: IBackoff<unknown> | undefined;

  constructor(options: Required<BackoffOptions>) {
    this.#factory = new ExponentialBackoff({ initialDelay: options.initialMs, maxDelay: options.maxMs });
  }

  /** The next delay in ms. */
  next(): number {
    this.#current = (this.#current ?? this.#factory.next()).next(undefined);
    return this.#current.duration;
  }

  reset(): void {
    this.#current = undefined;
  }

  /** Sleeps the next delay; rejects with `signal.reason` when it aborts. */
  wait(signal?: AbortSignal): Promise<void> {
    return sleep(this.next(), signal);
  }
}

export interface RetryOptions extends BackoffOptions {
  /** Ends the retries: rejects with `signal.reason`. */
  signal: AbortSignal;
  /** Whether an error is worth another try (errors that can never succeed are not). */
  retryable: (e: unknown) => boolean;
  /**
   * Stops retrying once failures have gone on this long (the store is down, not blinking), and
   * rejects with the last error. @default no limit
   */
  giveUpAfterMs?: number;
  /** Called before each pause, e.g. to log at debug. */
  onRetry?: (e: unknown, delayMs: number) => void;
}

/**
 * Runs `op` until it succeeds, a non-retryable error, `giveUpAfterMs` of failures, or `signal`
 * aborts; pauses through {@link Backoff}.
 */
export async function retryUntil<T>(op: (attempt: number) => Promise<T>, options: RetryOptions): Promise<T> {
  const { signal, retryable, onRetry, giveUpAfterMs } = options;
  let backoff: Backoff | undefined;
  let failingSince: number | undefined;
  for (let attempt = 0; ; attempt++) {
    signal.throwIfAborted();
    try {
      return await op(attempt);
    } catch (e) {
      if (signal.aborted) throw signal.reason;
      if (!retryable(e)) throw e;
      failingSince ??= performance.now();
      if (giveUpAfterMs !== undefined && performance.now() - failingSince >= giveUpAfterMs) throw e;
      backoff ??= new Backoff({ initialMs: options.initialMs ?? 50, maxMs: options.maxMs ?? 500 });
      const ms = backoff.next();
      onRetry?.(e, ms);
      await sleep(ms, signal);
    }
  }
}
