/**
 * One chaos candidate, in its own process so the nemesis can SIGKILL and SIGSTOP it. It runs one
 * workload kind over its backend's Candidate: `recipe` (campaign → a few fenced writes → resign,
 * or hold on for more; `recipe.ts`), `manager` (a LeadershipManager whose terms make the same
 * writes; `manager.ts`) or `shards` (a ShardManager whose shard terms write to their shard's
 * registers; `shards.ts`). Each write is "check the term, do the work, write": the work (a sleep) is
 * where a pause lands, so a holder frozen past its TTL wakes up and sends a write with a stale
 * fence, as in Kleppmann's example: the fenced register must refuse it. Every operation goes to
 * the parent as a history entry (HistoryRecorder). Config: env CHAOS_WORKER (JSON, WorkerConfig).
 */
import { sleep } from '../../src/core/abort.js';
import { HistoryRecorder, onParentMessage, workerReport } from '../../src/testing/index.js';
import { Rng } from '../rng.js';
import { backends } from './backends/index.js';
import type { CandidateContext, WorkloadKind } from './kind.js';
import { runManager } from './manager.js';
import { runRecipe } from './recipe.js';
import { openRegisters, registerName, type RegisterEndpoints } from './registers.js';
import { runShards } from './shards.js';
import type { Workload } from './workload.js';

export interface WorkerConfig extends CandidateContext {
  kind: WorkloadKind;
  seed: number;
  registers: RegisterEndpoints;
  /** Send writes without the fence check (the checker must then find violations). */
  bypass: boolean;
  /** Bounds of each write's work, ms. */
  workMs: [number, number];
  /** Writes between two decisions to resign or hold on. */
  writesPerRound: number;
  /** Chance of resigning at each decision. */
  resignChance: number;
  /** The shard kind: pause between two writes of a shard's term, ms. */
  writeGapMs: [number, number];
  /** How often a held term's local deadline is sampled for the history, ms. */
  deadlineSampleMs: number;
}

const cfg = JSON.parse(process.env.CHAOS_WORKER ?? '{}') as WorkerConfig;
const rng = new Rng(Rng.derive(cfg.seed, cfg.id));
const rec = new HistoryRecorder(cfg.id, { sink: (op) => workerReport('op', { op }), deadlineSampleMs: cfg.deadlineSampleMs });
const stop = new AbortController();
onParentMessage((m) => {
  if ((m as { cmd?: string }).cmd === 'stop') stop.abort(new Error('stopping'));
});
const registers = openRegisters(cfg.registers, cfg.bypass);

/**
 * Resolves once every history entry sent so far is in the IPC pipe (the callback of a later
 * message; messages are written in order). A SIGKILL right after a write was sent lost its
 * `invoke` still queued in this process, and the checker then found the write in its register
 * with nobody having written it (a 1,024-shard run: two such writes).
 */
const flushed = (): Promise<void> => new Promise((resolve) => (process.send ? process.send({ flush: true }, undefined, {}, () => resolve()) : resolve()));
const candidate = (await backends[cfg.store.backend]())(cfg);
let writes = 0;

const workload: Workload = {
  cfg,
  rng,
  rec,
  stop: stop.signal,
  candidate,
  async write(fence, shard) {
    await sleep(rng.int(cfg.workMs[0], cfg.workMs[1])); // the work: deaf to the signal on purpose
    const register = rng.pick(registers);
    const id = `${cfg.id}-w${++writes}`;
    const r = shard === undefined ? rec : rec.forShard(shard);
    await r.write(registerName(register.name, shard), id, fence, async () => {
      await flushed(); // the write's invoke is in the pipe before the write leaves (see flushed)
      return register.write(id, fence, shard);
    }).catch(() => undefined);
  },
  decide: (n) => n % cfg.writesPerRound === 0 && rng.chance(cfg.resignChance),
};

workerReport('ready');
await ({ recipe: runRecipe, manager: runManager, shards: runShards })[cfg.kind](workload);
await candidate.close().catch(() => undefined);
await Promise.all(registers.map((r) => r.close().catch(() => undefined)));
workerReport('closed');
process.exit(0);
