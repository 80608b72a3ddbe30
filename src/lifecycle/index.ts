export { LeadershipManager, type LeadershipManagerOptions, type ElectedHook, type DemotedHook } from './manager.js';
export { shutdownOnSignals, type ShutdownOptions } from './signals.js';
export type { TermContext, DemotionInfo, DemotionReason, LeadershipEvents, LeadershipState } from './types.js';
