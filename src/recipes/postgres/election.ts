import type { Pool } from 'pg';
import { Backoff, backoffOptions, type BackoffOptions } from '../../core/backoff.js';
import { LeaseCandidate } from '../../core/lease-candidate.js';
import type { Lease } from '../../core/lease.js';
import { observeByReading } from '../../core/observe.js';
import { optionalNumber, requireOptions } from '../../core/validate.js';
import { PgSessionLock, requirePool, type PgLockOptions } from './session-lock.js';

/** Options of a {@link PgElection}: those of {@link PgSessionLock} and the campaign's own. */
export interface PgElectionOptions extends PgLockOptions {
  /** Pauses between tries (jittered exponential backoff). @default { initialMs: 50, maxMs: 1000 } */
  backoff?: BackoffOptions;
  /** Time between two reads of the leader in `observe()`. @default 1000 */
  observeIntervalMs?: number;
}

/**
 * Leader election over Postgres: a try-lock loop with the backoff policy, each term held on a
 * pinned session ({@link PgSessionLock}), so the leader's signal aborts when its connection dies
 * (or, with `ttlMs`, when its heartbeat is late) and each term's fence exceeds the last.
 * Try-lock rather than a blocking wait, so an idle candidate holds no connection between tries.
 * `leader()` reads the recorded holder; `observe()` re-reads every `observeIntervalMs`.
 */
export class PgElection extends LeaseCandidate {
  constructor(pool: Pool, name: string, options?: PgElectionOptions) {
    requirePool(pool);
    const { backoff, observeIntervalMs, ...lockOptions } = requireOptions('options', options);
    const bounds = backoffOptions(backoff);
    const intervalMs = optionalNumber('observeIntervalMs', observeIntervalMs, 1000, { min: 10, max: 2 ** 31 - 1 });
    const lock = new PgSessionLock(pool, name, lockOptions);
    const tryLoop = async (signal: AbortSignal): Promise<Lease> => {
      const pause = new Backoff(bounds);
      for (;;) {
        signal.throwIfAborted();
        const lease = await lock.tryAcquire({ signal });
        if (lease) return lease;
        await pause.wait(signal);
      }
    };
    super({
      id: lock.id,
      name: lock.name,
      what: `postgres election '${lock.name}'`,
      acquire: tryLoop,
      leader: (signal) => lock.holder({ signal }),
      observe: (signal) =>
        observeByReading(
          { read: (s) => lock.holder({ signal: s }), changed: (ms, s) => sleepQuietly(ms, s), intervalMs, retryable: () => true, logger: lock.logger },
          signal,
        ),
      close: () => lock.close(),
    });
  }
}

/** Resolves after `ms` or on abort; never rejects. */
function sleepQuietly(ms: number, signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const done = (): void => {
      clearTimeout(t);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const t = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
  });
}
