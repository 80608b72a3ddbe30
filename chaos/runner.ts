import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { ConfigError } from '../src/index.js';
import { sleep } from '../src/core/abort.js';
import { checkHistory, historyToJSON, HistoryRecorder, type CheckResult, type History } from '../src/testing/index.js';
import { makeTempDir } from '../src/testing/process.js';
import { removeDir } from '../src/testing/registry.js';
import { CandidatePool, findFaketime } from './candidates.js';
import { Nemesis } from './nemesis.js';
import { chaosConfig, type ChaosConfig, type ChaosOptions } from './options.js';
import { RegisterHost } from './registers-host.js';
import { Rng } from './rng.js';
import { makeStore, type ChaosStore } from './stores/index.js';

export interface ChaosReport {
  config: Omit<ChaosConfig, 'log'>;
  /** Fault kinds the nemesis drew from. */
  faultKinds: string[];
  result: CheckResult;
  /** Wall-clock length of the run, ms (for the report only). */
  elapsedMs: number;
  /** Candidate processes that exited on their own, not by a fault: each is a failure of the run (its terms look live to the checker until their deadlines). */
  crashes: CandidatePool['crashes'];
}

/** Polls the store until nothing is left for the election, or `ms` pass; returns what is left. */
async function leftovers(store: ChaosStore, ms: number): Promise<string[]> {
  const end = performance.now() + ms;
  for (;;) {
    const left = await store.leftovers().catch((e: unknown) => [`leak check failed: ${String(e)}`]);
    if (left.length === 0 || performance.now() > end) return left;
    await sleep(200);
  }
}

/**
 * One chaos run on one backend: real servers, N candidate processes on one name writing to the
 * fenced registers, the nemesis for `durationMs`, then everyone leaves, the store is checked for
 * leaks, the registers' logs are read, and the whole history goes through {@link checkHistory}.
 */
export async function runChaos(options: ChaosOptions): Promise<ChaosReport> {
  const cfg = chaosConfig(options);
  const log = cfg.log ?? (() => undefined);
  const faketime = findFaketime();
  if (!faketime) throw new ConfigError('faketime', 'libfaketime is missing: install the Debian package faketime (scripts/ensure-servers.sh does)');
  const started = performance.now();
  const dir = makeTempDir('chaos');
  const store = makeStore(cfg.backend, cfg.kind === 'shards' ? cfg.shards : 0);
  const registers = new RegisterHost();
  const nemesisRec = new HistoryRecorder('nemesis');
  let pool: CandidatePool | undefined;
  try {
    await Promise.all([store.start(cfg.candidates), registers.start(dir)]);
    log(`chaos ${cfg.backend}: servers up at ${((performance.now() - started) / 1000).toFixed(1)} s`);
    const p = (pool = new CandidatePool(
      store,
      {
        name: store.name,
        kind: cfg.kind,
        ttlMs: cfg.ttlMs,
        marginMs: cfg.marginMs,
        seed: cfg.seed,
        registers: registers.endpoints,
        bypass: cfg.bypassFencing,
        workMs: [10, 60],
        writesPerRound: 3,
        resignChance: 0.3,
        // The shard kind: each shard term writes every 2–6 s (1,024 shards: ~250 writes/s in all),
        // and its deadline is sampled every 20 ms (a process follows ~200 terms at once).
        shards: cfg.kind === 'shards' ? cfg.shards : undefined,
        writeGapMs: [2000, 6000],
        deadlineSampleMs: cfg.kind === 'shards' ? 20 : 5,
      },
      dir,
      faketime,
    ));
    await Promise.all(Array.from({ length: cfg.candidates }, (_, i) => p.spawn(i)));
    const warm = performance.now() + 60_000;
    while (p.holder() === undefined) {
      if (performance.now() > warm) throw new Error(`chaos ${cfg.backend}: nobody was elected within 60 s`);
      await sleep(50);
    }
    // The leak check must see a live holder's lock, or finding nothing at the end proves nothing.
    // A short term (the manager kind resigns after a few writes) may end between the two reads:
    // look again, for as long as it takes to see one.
    const probe = performance.now() + 15_000;
    while ((await store.leftovers()).length === 0) {
      if (performance.now() > probe) throw new Error(`chaos ${cfg.backend}: the leak check does not see the holder's lock`);
      await sleep(20);
    }
    log(`chaos ${cfg.backend}: ${cfg.candidates} candidates up at ${((performance.now() - started) / 1000).toFixed(1)} s, first term granted; nemesis for ${cfg.durationMs} ms (seed ${cfg.seed})`);
    const nemesis = new Nemesis({ rng: new Rng(cfg.seed), rec: nemesisRec, pool: p, storeFaults: store.faults, ttlMs: cfg.ttlMs, failoverBoundMs: cfg.failoverBoundMs, only: cfg.faults, aimAtHolder: cfg.aimAtHolder, log, members: cfg.kind === 'shards' });
    if (nemesis.kinds.length === 0) throw new ConfigError('faults', `none of ${cfg.faults?.join(', ')} applies to ${cfg.backend}`);
    const stop = new AbortController();
    const timer = setTimeout(() => stop.abort(), cfg.durationMs);
    await nemesis.run(stop.signal);
    clearTimeout(timer);
    log(`chaos ${cfg.backend}: nemesis done at ${((performance.now() - started) / 1000).toFixed(1)} s; healing and stopping`);
    await store.heal();
    const grace = 2 * cfg.ttlMs + 5000;
    await p.stopAll(grace, (name) => nemesisRec.fault('kill', 'start', name, 'did not leave in time'));
    log(`chaos ${cfg.backend}: candidates gone at ${((performance.now() - started) / 1000).toFixed(1)} s`);
    const left = await leftovers(store, grace);
    log(`chaos ${cfg.backend}: leak check done at ${((performance.now() - started) / 1000).toFixed(1)} s`);
    const history: History = { ops: [...p.ops, ...nemesisRec.ops], registers: await registers.logs(), leftovers: left };
    const result = checkHistory(history, { failoverBoundMs: cfg.failoverBoundMs });
    const { log: _log, ...config } = cfg;
    const report: ChaosReport = { config, faultKinds: nemesis.kinds, result, elapsedMs: performance.now() - started, crashes: [...p.crashes] };
    if (cfg.historyFile) {
      mkdirSync(dirname(cfg.historyFile), { recursive: true });
      writeFileSync(cfg.historyFile, historyToJSON({ ...report, result: { valid: result.valid, violations: result.violations, stats: result.stats }, history }));
    }
    return report;
  } finally {
    await pool?.killAll();
    await Promise.allSettled([store.stop(), registers.stop()]);
    removeDir(dir);
  }
}
