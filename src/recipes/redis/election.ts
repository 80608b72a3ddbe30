import { randomUUID } from 'node:crypto';
import { LeaseCandidate } from '../../core/lease-candidate.js';
import { optionalString, requireOptions } from '../../core/validate.js';
import { RedisLock, type RedisLockOptions } from './lock.js';
import type { RedisClient } from './scripts.js';

export interface RedisElectionOptions extends RedisLockOptions {
  /** This participant's identity. @default a random UUID */
  id?: string;
}

/**
 * Leader election over a {@link RedisLock}: the term is the lock's lease, so the leader's
 * `signal` aborts before another candidate can win, and each term's fence exceeds the previous.
 * For the lifecycle manager (`Candidate`). Waiting candidates are woken by the resigning
 * leader's release.
 */
export class RedisElection extends LeaseCandidate {
  /** The election's name. */
  readonly name: string;

  constructor(redis: RedisClient, name: string, options?: RedisElectionOptions) {
    const { id, ...lockOptions } = requireOptions('options', options);
    const lock = new RedisLock(redis, name, lockOptions);
    super(
      optionalString('id', id, randomUUID(), { maxLength: 200 }),
      `redis election '${lock.name}'`,
      (signal) => lock.acquire({ signal }),
      () => lock.close(),
    );
    this.name = lock.name;
  }
}
