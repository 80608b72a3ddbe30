export type { History, HistoryOp, OpType, OpFunction, RegisterEntry, Rule, Violation, Term, Failover, CheckStats, CheckResult, CheckOptions } from './types.js';
export { checkHistory } from './checker.js';
export { reconstructTerms } from './terms.js';
export { HistoryRecorder, type HistoryRecorderOptions } from './recorder.js';
export { historyToJSON, historyFromJSON } from './json.js';
