/**
 * tenure: leader election and distributed locks that stay correct when a lease expires mid-work.
 * Core contracts; the backends live in `tenure/zk`, `tenure/etcd`, `tenure/redis`,
 * `tenure/postgres`, and the real-server test kit in `tenure/testing`.
 */
export {
  TenureError,
  ConfigError,
  LeaseLostError,
  StaleFenceError,
  NotLeaderError,
  NotHeldError,
  BusyError,
  StateError,
  SessionExpiredError,
  AcquireTimeoutError,
  ClosedError,
  StoreUnavailableError,
  PermissionDeniedError,
  TlsError,
  RequestTooLargeError,
  MissingPeerError,
  ServerStartError,
  TermEndedError,
  NoTermError,
  type TermEndReason,
  type TenureErrorCode,
  type TenureErrorOptions,
  type LeaseLostReason,
  type TlsProblem,
} from './core/errors.js';
export { monotonicClock, monotonicNs, type Clock } from './core/clock.js';
export type { Lease } from './core/lease.js';
export type { LeaseEvents, SessionEvents, SessionState } from './core/lease-events.js';
export type { Candidate, LeaderInfo } from './core/candidate.js';
export type { Membership, Member } from './core/membership.js';
export type { WaitOptions, Logger } from './core/options.js';
export type { BackoffOptions } from './core/backoff.js';
export type { FencedResource } from './core/fencing.js';
export { STALE_FENCE_CHANNEL, type StaleFenceEvent } from './core/fence-events.js';
export { InMemoryFencedResource, type FenceDecision } from './core/memory-resource.js';
export {
  LeadershipManager,
  shutdownOnSignals,
  currentTerm,
  Leader,
  bindLeader,
  NOT_LEADER,
  type NotLeader,
  type BindLeaderOptions,
  type LeaderOptions,
  type LeaderDecorator,
  type SentinelLeaderDecorator,
  LeaderSchedule,
  type ScheduledRun,
  type ScheduledFn,
  type CronScheduleOptions,
  type LeadershipManagerOptions,
  type ElectedHook,
  type DemotedHook,
  type ShutdownOptions,
  type TermContext,
  type DemotionInfo,
  type DemotionReason,
  type LeadershipEvents,
  type LeadershipState,
  ShardManager,
  shardOwner,
  shardsOf,
  type ShardManagerOptions,
  type ShardCandidateFactory,
  type ShardAcquiredHook,
  type ShardReleasedHook,
  type ShardReleaseInfo,
  type ShardAcquireInfo,
  type ShardEvents,
} from './lifecycle/index.js';
