import type { RedisClient } from './client.js';
import { LeaseCandidate } from '../../core/lease-candidate.js';
import { observeByReading } from '../../core/observe.js';
import { optionalNumber, requireOptions } from '../../core/validate.js';
import { REDIS_LOCK_KEYS, RedisLock, type RedisLockOptions } from './lock.js';

/** Options of a {@link RedisElection}: those of {@link RedisLock} and the observer's own. */
export interface RedisElectionOptions extends RedisLockOptions {
  /** Longest time between two reads of the leader in `observe()` (releases and grants are also announced). @default 1000 */
  observeIntervalMs?: number;
}

/**
 * Leader election over a {@link RedisLock}: the term is the lock's lease, so the leader's
 * `signal` aborts before another candidate can win, and each term's fence exceeds the previous.
 * Waiting candidates are woken by the resigning leader's release; `leader()` reads the lock's
 * holder (id and fence, stored with the lock); `observe()` re-reads on every grant and release
 * message and at least every `observeIntervalMs`.
 */
export class RedisElection extends LeaseCandidate {
  constructor(redis: RedisClient, name: string, options?: RedisElectionOptions) {
    const { observeIntervalMs, ...lockOptions } = requireOptions('options', options, { ...REDIS_LOCK_KEYS, observeIntervalMs: true });
    const intervalMs = optionalNumber('observeIntervalMs', observeIntervalMs, 1000, { min: 10, max: 2 ** 31 - 1 });
    const lock = new RedisLock(redis, name, lockOptions);
    super({
      id: lock.id,
      name: lock.name,
      what: `redis election '${lock.name}'`,
      acquire: (signal) => lock.acquire({ signal }),
      leader: (signal) => lock.holder({ signal }),
      observe: (signal) => {
        const feed = lock.changeFeed();
        const it = observeByReading({ read: (s) => lock.holder({ signal: s }), changed: (ms, s) => feed.next(ms, s), intervalMs, retryable: () => true, logger: lock.logger }, signal);
        return closing(it, () => feed.close());
      },
      close: () => lock.close(),
    });
  }
}

/** Wraps a generator so `cleanup` runs when it ends, however it ends. */
async function* closing<T>(it: AsyncGenerator<T, void, undefined>, cleanup: () => void): AsyncGenerator<T, void, undefined> {
  try {
    yield* it;
  } finally {
    cleanup();
  }
}
