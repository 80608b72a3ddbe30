import type { LeaderInfo } from './candidate.js';
import { retryUntil } from './backoff.js';
import type { Logger } from './options.js';

/** Whether two leader readings name the same leader in the same term (both nobody counts as same). */
export function sameLeader(a: LeaderInfo | undefined, b: LeaderInfo | undefined): boolean {
  if (a === undefined || b === undefined) return a === b;
  return a.id === b.id && a.fence === b.fence;
}

export interface ObserveByReadingInit<T = LeaderInfo | undefined> {
  /** Reads the current leader (or whatever is observed) from the store. */
  read: (signal: AbortSignal) => Promise<T>;
  /** Whether two readings are the same (no change to yield). @default {@link sameLeader} */
  same?: (a: T, b: T) => boolean;
  /**
   * Resolves at the store's next hint that the leader may have changed (a release message), or
   * after `ms` at the latest. Never rejects.
   */
  changed: (ms: number, signal: AbortSignal) => Promise<void>;
  /** Longest time between two reads, so a change the store sends no hint for (an expiry) is seen. */
  intervalMs: number;
  /** Whether a failed read is worth retrying (a transport error), or ends the observation. */
  retryable: (e: unknown) => boolean;
  logger: Logger;
}

/**
 * Leader changes for stores without a change feed for the leader (Redis, Postgres): read, yield
 * when the reading differs from the last one, wait for a hint or the interval, read again. Failed
 * reads are retried through the backoff policy; the iterator ends with `signal.reason`.
 */
export async function* observeByReading<T = LeaderInfo | undefined>(init: ObserveByReadingInit<T>, signal: AbortSignal): AsyncGenerator<T, void, undefined> {
  const same = init.same ?? (sameLeader as unknown as (a: T, b: T) => boolean);
  let first = true;
  let last: T | undefined;
  const onRetry = (e: unknown): void => init.logger.debug({ err: e }, 'observe: read failed; retrying');
  for (;;) {
    const now = await retryUntil(() => init.read(signal), { signal, retryable: init.retryable, onRetry, initialMs: 50, maxMs: init.intervalMs });
    if (first || !same(now, last as T)) {
      first = false;
      last = now;
      yield now;
    }
    await init.changed(init.intervalMs, signal);
  }
}
