import type { HistoryRecorder } from '../../src/testing/index.js';
import type { Rng } from '../rng.js';
import type { WorkerConfig } from './candidate.js';
import type { ChaosCandidate } from './kind.js';

/** What a workload kind gets from the candidate process. */
export interface Workload {
  cfg: WorkerConfig;
  rng: Rng;
  rec: HistoryRecorder;
  /** Aborts when the runner asks the process to leave. */
  stop: AbortSignal;
  candidate: ChaosCandidate;
  /**
   * One write of a term: the work (a sleep, deaf to the signal on purpose), then the fenced write
   * to a random register, recorded; with `shard`, to that shard's registers, in its recorder.
   */
  write(fence: bigint, shard?: number): Promise<void>;
  /** After the `n`th write of a term: true to resign now. */
  decide(n: number): boolean;
}
