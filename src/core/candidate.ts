import type { Lease } from './lease.js';

/**
 * Anything that can campaign for leadership: an etcd election, a ZooKeeper latch, a Redis or
 * Postgres lock. The lifecycle manager is written against this interface only and never knows
 * which store it runs on.
 */
export interface Candidate {
  /** This participant's identity, as other participants see it. */
  readonly id: string;
  /**
   * Waits until this candidate leads and resolves with the term as a {@link Lease}. Rejects with
   * `signal.reason` when `signal` aborts, after removing this candidate's place in the queue.
   */
  campaign(options?: { signal?: AbortSignal }): Promise<Lease>;
  /** Leaves the queue and ends any term. Idempotent. */
  close(): Promise<void>;
}
