import { ConfigError } from './errors.js';
import type { WaitOptions } from './options.js';

/**
 * The resource side of fencing: it remembers the highest fence it has accepted and refuses any
 * write carrying a lower one with a {@link StaleFenceError}, so a holder whose lease ended while
 * it was paused cannot overwrite its successor's work. The same holder may write many times with
 * its own fence (equal fences are accepted).
 *
 * `Ctx` is what the write function receives: nothing for the in-memory resource, a transaction
 * client for Postgres.
 */
export interface FencedResource<Ctx = void> {
  /** The resource's name (part of every StaleFenceError). */
  readonly name: string;
  /**
   * Runs `fn` only if `fence` ≥ the highest fence accepted so far, atomically with recording
   * `fence` as the new highest. A lower fence rejects with `StaleFenceError` and `fn` never runs.
   * If `fn` throws, the write is not accepted and the highest fence does not move.
   *
   * `options` bounds the write like every other wait: `signal` aborts it (it rejects with exactly
   * `signal.reason`), `timeoutMs` gives up with an AcquireTimeoutError. Each implementation says
   * which of its phases they cover and what is known of a write given up on.
   */
  write<T>(fence: bigint, fn: (ctx: Ctx) => T | Promise<T>, options?: WaitOptions): Promise<T>;
  /** The highest fence accepted so far (`0n` before any write); `options` bounds the read. */
  highestFence(options?: WaitOptions): Promise<bigint>;
}

/** Validates a fence argument (a non-negative bigint). */
export function requireFence(fence: unknown): bigint {
  if (typeof fence !== 'bigint') throw new ConfigError('fence', `must be a bigint, got ${typeof fence}`);
  if (fence < 0n) throw new ConfigError('fence', `must be ≥ 0, got ${fence}`);
  return fence;
}
