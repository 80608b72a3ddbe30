import type { BackoffOptions } from '../core/backoff.js';
import type { Candidate } from '../core/candidate.js';
import type { Member } from '../core/membership.js';
import type { Logger } from '../core/options.js';
import type { OptionKeys } from '../core/validate.js';
import type { DemotionInfo, TermContext } from './types.js';

/** Options of a {@link ShardManager}, validated at construction. */
export interface ShardManagerOptions {
  /** How many shards there are: 0 … shards − 1. The same on every member. */
  shards: number;
  /** Each shard term's drain (see LeadershipManagerOptions.drainTimeoutMs). @default 10000 */
  drainTimeoutMs?: number;
  /** Pauses before a shard campaigns again after a lost term or a failed campaign, and between retries of the membership. @default { initialMs: 100, maxMs: 5000 } */
  backoff?: BackoffOptions;
  /**
   * How long a new live set must stay unchanged before shards move, in ms: a member that drops
   * out and joins again within it (its session's lease lost to a pause, then a new one) moves
   * nothing, and members joining together move the shards once. It adds to a failover. @default 250
   */
  settleMs?: number;
  /** @default silent */
  logger?: Logger;
}

/** @internal the keys of {@link ShardManagerOptions}. */
export const SHARD_MANAGER_KEYS: OptionKeys<ShardManagerOptions> = { shards: true, drainTimeoutMs: true, backoff: true, settleMs: true, logger: true };

/** Makes the candidate of one shard (a new one each time the shard is assigned here; it is closed when the shard goes). */
export type ShardCandidateFactory = (shard: number) => Candidate;
/** Runs at the start of every term of a shard, with the term's context (its own signal and fence). */
export type ShardAcquiredHook = (shard: number, ctx: TermContext) => unknown;
/** Runs once per shard term, after its drain and the release of its lease. */
export type ShardReleasedHook = (shard: number, info: ShardReleaseInfo) => unknown;

/** What `onShardReleased` hears: the term's demotion, and whether the shard moved to another member. */
export interface ShardReleaseInfo extends DemotionInfo {
  /** True when the term ended because the shard was assigned to another member (reason `closed`). */
  readonly moved: boolean;
}

/** How a shard term began here. */
export interface ShardAcquireInfo {
  /**
   * From the shard's assignment to this member to its term's start, in ms: the hand-off when it
   * moved here (the old owner's drain and release, or its lease's expiry). 0 for a later term of
   * the same assignment (after a lost term).
   */
  readonly waitedMs: number;
  /**
   * The member that owned the shard before it was assigned here (by the live set this member saw
   * before; for its first reading, the owner the set would give it without this member), or
   * undefined when it had none (the group was empty).
   */
  readonly from: string | undefined;
}

/** The typed events of a {@link ShardManager} (an eventemitter3 event map). */
export interface ShardEvents {
  /** A shard's term began here; `onShardAcquired` hooks are running. */
  shardAcquired: (shard: number, ctx: TermContext, info: ShardAcquireInfo) => void;
  /** A shard's term ended and drained; `onShardReleased` hooks ran. */
  shardReleased: (shard: number, info: ShardReleaseInfo) => void;
  /**
   * The shards assigned to this member changed: `added` start campaigning (`moved`: those of them
   * another member owned), `removed` drain and go.
   */
  assigned: (shards: readonly number[], change: { added: readonly number[]; moved: readonly number[]; removed: readonly number[]; members: readonly Member[] }) => void;
  /** A hook threw, a campaign or the membership failed: the manager carries on. */
  error: (error: unknown, shard?: number) => void;
}
