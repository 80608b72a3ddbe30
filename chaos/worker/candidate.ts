/**
 * One chaos candidate, in its own process so the nemesis can SIGKILL and SIGSTOP it. It loops:
 * campaign → a few fenced writes → resign, or hold on for more. Each write is "check the lease,
 * do the work, write": the work (a sleep) is where a pause lands, so a holder frozen past its TTL
 * wakes up and sends a write with a stale fence, as in Kleppmann's example: the fenced register
 * must refuse it. Every operation goes to the parent as a history entry (HistoryRecorder).
 * Config: env CHAOS_WORKER (JSON, see WorkerConfig).
 */
import { sleep } from '../../src/core/abort.js';
import { HistoryRecorder, onParentMessage, workerReport } from '../../src/testing/index.js';
import { Rng } from '../rng.js';
import type { CandidateContext } from './kind.js';
import { kinds } from './kinds/index.js';
import { openRegisters, type RegisterEndpoints } from './registers.js';

export interface WorkerConfig extends CandidateContext {
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
}

const cfg = JSON.parse(process.env.CHAOS_WORKER ?? '{}') as WorkerConfig;
const rng = new Rng(Rng.derive(cfg.seed, cfg.id));
const rec = new HistoryRecorder(cfg.id, { sink: (op) => workerReport('op', { op }) });
const stop = new AbortController();
onParentMessage((m) => {
  if ((m as { cmd?: string }).cmd === 'stop') stop.abort(new Error('stopping'));
});
const registers = openRegisters(cfg.registers, cfg.bypass);
const candidate = (await kinds[cfg.store.backend]())(cfg);
let writes = 0;

async function hold(term: Awaited<ReturnType<typeof candidate.campaign>>): Promise<void> {
  for (let n = 1; !stop.signal.aborted; n++) {
    if (term.lost) return;
    await sleep(rng.int(cfg.workMs[0], cfg.workMs[1])); // the work: deaf to the signal on purpose
    const register = rng.pick(registers);
    const id = `${cfg.id}-w${++writes}`;
    await rec.write(register.name, id, term.fence, () => register.write(id, term.fence)).catch(() => undefined);
    if (n % cfg.writesPerRound === 0 && rng.chance(cfg.resignChance)) break;
  }
  if (!term.signal.aborted) await rec.release(term, () => candidate.resign()).catch(() => undefined);
}

workerReport('ready');
while (!stop.signal.aborted) {
  let term;
  try {
    term = await rec.acquire(() => candidate.campaign(stop.signal));
  } catch {
    if (!stop.signal.aborted) await sleep(100 + rng.int(0, 100));
    continue;
  }
  await hold(term);
}
await candidate.close().catch(() => undefined);
await Promise.all(registers.map((r) => r.close().catch(() => undefined)));
workerReport('closed');
process.exit(0);
