import type { Lease } from './lease.js';
import type { WaitOptions } from './options.js';

/** Who leads an election (or holds a lock), as any participant or observer sees it. */
export interface LeaderInfo {
  /** The leader's id (its `Candidate.id`). */
  readonly id: string;
  /**
   * The fence of the leader's current term, when the store can tell (undefined while an etcd head
   * has not claimed yet, or when that history was compacted away).
   */
  readonly fence: bigint | undefined;
}

/**
 * Anything that can campaign for leadership: an etcd election, a ZooKeeper latch, a Redis or
 * Postgres election. The lifecycle manager is written against this interface only and never knows
 * which store it runs on. Every implementation passes the one contract suite
 * (test/contract/candidate.ts):
 *
 * - `campaign()` resolves with the term; while a term is live it resolves with that same term
 *   (it never queues twice). A second `campaign()` while one is in flight rejects with BusyError.
 *   An aborted or timed-out campaign leaves nothing queued at the store and no listener attached.
 * - A grant read past the candidate's own local deadline (its process paused with the reply
 *   unread) is never handed out: the store may have given the term away since; the campaign
 *   goes on, on a fresh lease or session.
 * - After any loss (lease expired or revoked, session expired, connection lost) the same object
 *   campaigns again on a fresh lease or session; the new term's fence exceeds the old one's.
 * - `resign()` ends the term and stays a candidate; `close()` ends it for good (a campaign in
 *   flight rejects with ClosedError) and is idempotent.
 * - `leader()` and `observe()` show every participant the leader's `id` and fence.
 */
export interface Candidate extends AsyncDisposable {
  /** This participant's identity, as every participant sees it in `leader()`. */
  readonly id: string;
  /** The election's name (an etcd prefix, a ZooKeeper path, a Redis or Postgres lock name). */
  readonly name: string;
  /** The live term, if this candidate leads now. */
  readonly term: Lease | undefined;
  /** Waits until this candidate leads and resolves with the term (a {@link Lease}). */
  campaign(options?: WaitOptions): Promise<Lease>;
  /** Ends the current term, if any, releasing the lease at the store; the object stays usable. */
  resign(): Promise<void>;
  /** The current leader, read from the store; undefined when nobody leads. */
  leader(options?: WaitOptions): Promise<LeaderInfo | undefined>;
  /**
   * Leader changes as an async iterator: the current leader first (undefined when nobody leads),
   * then every change of leader or term. Ends (rejects with `signal.reason`) when `signal` aborts.
   */
  observe(options?: { signal?: AbortSignal }): AsyncGenerator<LeaderInfo | undefined, void, undefined>;
  /** Aborts a campaign in flight, ends any term and leaves for good. Idempotent. */
  close(): Promise<void>;
}
