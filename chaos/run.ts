/**
 * `npm run chaos -- [--backend etcd|zk|redis|postgres|all] [--kind recipe|manager] [--duration 10m]
 * [--seed N] [--candidates 5] [--faults kill,pause,…] [--bypass-fencing] [--out dir]`
 * Runs the chaos suite on each backend in turn (never two at once: the machine is shared),
 * prints the results and writes each history to `<out>/<backend>-<seed>[-manager][-bypassed].json`. Exits 1 when any
 * run found a violation. `npm run chaos -- --check FILE…` checks saved histories again instead.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { ConfigError } from '../src/index.js';
import { parseDuration } from './options.js';
import { checkHistory, historyFromJSON, type History } from '../src/testing/index.js';
import { runChaos, type ChaosReport } from './runner.js';
import { BACKENDS, type Backend } from './stores/index.js';
import { summarize } from './summary.js';
import type { WorkloadKind } from './worker/kind.js';

const { values, positionals } = parseArgs({
  options: {
    backend: { type: 'string', default: 'all' },
    kind: { type: 'string', default: 'recipe' },
    duration: { type: 'string', default: '60s' },
    seed: { type: 'string' },
    candidates: { type: 'string' },
    faults: { type: 'string' },
    'bypass-fencing': { type: 'boolean', default: false },
    out: { type: 'string', default: 'chaos-results' },
    quiet: { type: 'boolean', default: false },
    check: { type: 'boolean', default: false },
  },
  allowPositionals: true,
});

if (values.check) {
  let found = 0;
  for (const file of positionals) {
    const saved = historyFromJSON<ChaosReport & { history: History }>(readFileSync(file, 'utf8'));
    const result = checkHistory(saved.history, { failoverBoundMs: saved.config.failoverBoundMs });
    console.log(summarize({ ...saved, result }, file));
    found += result.violations.length;
  }
  process.exit(found > 0 ? 1 : 0);
}

const backends = values.backend === 'all' ? BACKENDS : (values.backend!.split(',') as Backend[]);
for (const b of backends) if (!BACKENDS.includes(b)) throw new ConfigError('backend', `must be all or one of ${BACKENDS.join(', ')}, got ${b}`);
const durationMs = parseDuration('duration', values.duration!);
const seed = values.seed === undefined ? Math.floor(Math.random() * 2 ** 31) : Number(values.seed);
let violations = 0;
for (const backend of backends) {
  const historyFile = join(values.out!, `${backend}-${seed}${values.kind === 'manager' ? '-manager' : ''}${values['bypass-fencing'] ? '-bypassed' : ''}.json`);
  const report = await runChaos({
    backend,
    kind: values.kind as WorkloadKind,
    durationMs,
    seed,
    ...(values.candidates ? { candidates: Number(values.candidates) } : {}),
    ...(values.faults ? { faults: values.faults.split(',') } : {}),
    bypassFencing: values['bypass-fencing'],
    historyFile,
    log: values.quiet ? undefined : (line) => console.log(line),
  });
  console.log(summarize(report, historyFile));
  violations += report.result.violations.length;
}
if (values['bypass-fencing']) console.log(`fencing was bypassed: ${violations} violations found (the checker must find some)`);
process.exit(violations > 0 ? 1 : 0);
