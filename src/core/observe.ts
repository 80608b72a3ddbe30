import type { LeaderInfo } from './candidate.js';
import { Backoff } from './backoff.js';
import { sleep } from './abort.js';
import type { Logger } from './options.js';

/** Whether two leader readings name the same leader in the same term (both nobody counts as same). */
export function sameLeader(a: LeaderInfo | undefined, b: LeaderInfo | undefined): boolean {
  if (a === undefined || b === undefined) return a === b;
  return a.id === b.id && a.fence === b.fence;
}

export interface ObserveByReadingInit {
  /** Reads the current leader from the store. */
  read: (signal: AbortSignal) => Promise<LeaderInfo | undefined>;
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
export async function* observeByReading(init: ObserveByReadingInit, signal: AbortSignal): AsyncGenerator<LeaderInfo | undefined, void, undefined> {
  let first = true;
  let last: LeaderInfo | undefined;
  const backoff = new Backoff({ initialMs: 50, maxMs: init.intervalMs });
  for (;;) {
    signal.throwIfAborted();
    let now: LeaderInfo | undefined;
    try {
      now = await init.read(signal);
      backoff.reset();
    } catch (e) {
      if (signal.aborted) throw signal.reason;
      if (!init.retryable(e)) throw e;
      init.logger.debug({ err: e }, 'observe: read failed; retrying');
      await sleep(backoff.next(), signal);
      continue;
    }
    if (first || !sameLeader(now, last)) {
      first = false;
      last = now;
      yield now;
    }
    await init.changed(init.intervalMs, signal);
  }
}
