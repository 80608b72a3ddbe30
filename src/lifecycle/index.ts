export { LeadershipManager, type LeadershipManagerOptions, type ElectedHook, type DemotedHook } from './manager.js';
export { shutdownOnSignals, type ShutdownOptions } from './signals.js';
export type { TermContext, DemotionInfo, DemotionReason, LeadershipEvents, LeadershipState } from './types.js';
export { LeaderSchedule, type ScheduledRun, type ScheduledFn, type CronScheduleOptions } from './schedule.js';
export { currentTerm } from './context.js';
export { Leader, bindLeader, type LeaderOptions, type LeaderDecorator } from './leader.js';
