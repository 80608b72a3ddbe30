import type { Pool } from 'pg';
import { sleepQuietly } from '../../core/abort.js';
import { Backoff, backoffOptions, retryUntil, type BackoffOptions } from '../../core/backoff.js';
import { StoreUnavailableError } from '../../core/errors.js';
import { LeaseCandidate } from '../../core/lease-candidate.js';
import type { Lease } from '../../core/lease.js';
import { observeByReading } from '../../core/observe.js';
import { optionalBoolean, optionalNumber, requireOptions } from '../../core/validate.js';
import { PG_LOCK_KEYS, PgSessionLock, requirePool, type PgLockOptions } from './session-lock.js';

/** Options of a {@link PgElection}: those of {@link PgSessionLock} and the campaign's own. */
export interface PgElectionOptions extends PgLockOptions {
  /** Pauses between tries (jittered exponential backoff). @default { initialMs: 50, maxMs: 1000 } */
  backoff?: BackoffOptions;
  /** Time between two reads of the leader in `observe()`. @default 1000 */
  observeIntervalMs?: number;
  /**
   * Wait in the server's lock queue, granted the moment the leader's transaction ends, instead of
   * trying with `backoff` between tries (which hears a release up to `backoff.maxMs` late). A
   * waiter holds one pool connection while it waits; behind a transaction pooler that pins a
   * server connection per waiter — set false there to poll. @default true
   */
  waitInQueue?: boolean;
}

/**
 * Leader election over Postgres: a wait in the server's lock queue (or, with `waitInQueue:
 * false`, a try-lock loop with the backoff policy), each term held on a
 * pinned session ({@link PgSessionLock}), so the leader's signal aborts when its connection dies
 * (or, with `ttlMs`, when its heartbeat is late) and each term's fence exceeds the last.
 * The poll exists for transaction poolers, where a queued waiter pins a server connection.
 * `leader()` reads the recorded holder; `observe()` re-reads every `observeIntervalMs`.
 */
export class PgElection extends LeaseCandidate {
  constructor(pool: Pool, name: string, options?: PgElectionOptions) {
    requirePool(pool);
    const { backoff, observeIntervalMs, waitInQueue, ...lockOptions } = requireOptions('options', options, { ...PG_LOCK_KEYS, backoff: true, observeIntervalMs: true, waitInQueue: true });
    const queued = optionalBoolean('waitInQueue', waitInQueue, true);
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
    // A queued waiter whose connection is dropped under it (a terminated backend, a pooler's
    // restart) queues again once; a second failure in a row is the store's, and it is reported.
    const queuedWait = (signal: AbortSignal): Promise<Lease> => {
      let dropped = 0;
      return retryUntil(() => lock.acquire({ signal }), {
        signal,
        retryable: (e) => e instanceof StoreUnavailableError && dropped++ === 0,
        onRetry: (e) => lock.logger.debug({ err: e }, 'postgres election: the waiting connection was dropped; queueing again'),
        ...bounds,
      });
    };
    super({
      id: lock.id,
      name: lock.name,
      what: `postgres election '${lock.name}'`,
      acquire: queued ? queuedWait : tryLoop,
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
