export { LeadershipManager, type LeadershipManagerOptions, type ElectedHook, type DemotedHook } from './manager.js';
export { shutdownOnSignals, type ShutdownOptions } from './signals.js';
export type { TermContext, DemotionInfo, DemotionReason, LeadershipEvents, LeadershipState } from './types.js';
export { LeaderSchedule, type ScheduledRun, type ScheduledFn, type CronScheduleOptions } from './schedule.js';
export { currentTerm } from './context.js';
export { Leader, bindLeader, NOT_LEADER, type NotLeader, type LeaderOptions, type LeaderDecorator, type SentinelLeaderDecorator, type BindLeaderOptions } from './leader.js';
export { ShardManager, type ShardManagerOptions, type ShardCandidateFactory, type ShardAcquiredHook, type ShardReleasedHook, type ShardReleaseInfo, type ShardAcquireInfo, type ShardEvents } from './shards.js';
export { shardOwner, shardsOf } from './rendezvous.js';
