import { randomUUID } from 'node:crypto';
import type { Pool } from 'pg';
import { sleep } from '../../core/abort.js';
import { ConfigError } from '../../core/errors.js';
import { LeaseCandidate } from '../../core/lease-candidate.js';
import type { Lease } from '../../core/lease.js';
import { optionalNumber, optionalString, requireOptions } from '../../core/validate.js';
import { PgSessionLock, requirePool, type PgLockOptions } from './session-lock.js';

export interface PgElectionOptions extends PgLockOptions {
  /** This participant's identity. @default a random UUID */
  id?: string;
  /** First pause between tries. @default 50 */
  minBackoffMs?: number;
  /** Longest pause between tries (doubling, with jitter). @default 1000 */
  maxBackoffMs?: number;
}

/**
 * Leader election over Postgres: a try-lock loop with jittered exponential backoff, each term held
 * on a pinned session ({@link PgSessionLock}), so the leader's signal aborts when its connection
 * dies (or, with `leaseMs`, when its heartbeat is late) and each term's fence exceeds the last.
 * Try-lock rather than a blocking wait, so an idle candidate holds no connection between tries.
 */
export class PgElection extends LeaseCandidate {
  /** The election's name. */
  readonly name: string;

  constructor(pool: Pool, name: string, options?: PgElectionOptions) {
    requirePool(pool);
    const { id, minBackoffMs, maxBackoffMs, ...lockOptions } = requireOptions('options', options);
    const minMs = optionalNumber('minBackoffMs', minBackoffMs, 50, { min: 1 });
    const maxMs = optionalNumber('maxBackoffMs', maxBackoffMs, 1000, { min: 1 });
    if (maxMs < minMs) throw new ConfigError('maxBackoffMs', `must be at least minBackoffMs (${minMs}), got ${maxMs}`);
    const lock = new PgSessionLock(pool, name, lockOptions);
    const tryLoop = async (signal: AbortSignal): Promise<Lease> => {
      for (let i = 0; ; i++) {
        signal.throwIfAborted();
        const lease = await lock.tryAcquire();
        if (lease) return lease;
        const cap = Math.min(maxMs, minMs * 2 ** Math.min(i, 20));
        await sleep(cap / 2 + (Math.random() * cap) / 2, signal);
      }
    };
    super(optionalString('id', id, randomUUID(), { maxLength: 200 }), `postgres election '${lock.name}'`, tryLoop);
    this.name = lock.name;
  }
}
