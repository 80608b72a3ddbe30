export type { History, HistoryOp, OpType, OpFunction, RegisterEntry, CheckRule, Violation, HistoryTerm, Failover, CheckStats, CheckResult, CheckOptions } from './types.js';
export { checkHistory } from './checker.js';
export { HistoryRecorder, type HistoryRecorderOptions } from './recorder.js';
export { historyToJSON, historyFromJSON } from './json.js';
