/**
 * `npm run chaos -- [--backend etcd|zk|redis|postgres|all] [--kind recipe|manager|shards] [--shards 1024] [--ttl 2s]
 * [--duration 10m] [--seed N] [--candidates 5] [--faults kill,pause,…] [--bypass-fencing] [--out dir] [--record]`
 * Runs the chaos suite on each backend in turn (never two at once: the machine is shared),
 * prints the results and writes each history to `<out>/<backend>-<seed>[-manager|-shards][-bypassed].json`. Exits 1 when any
 * run found a violation; `--record` appends each run's block to chaos/RESULTS.md. `npm run chaos --
 * --check FILE…` checks saved histories again instead.
 */
import { execFileSync } from 'node:child_process';
import { appendFileSync, readFileSync } from 'node:fs';
import { loadavg } from 'node:os';
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
    shards: { type: 'string' },
    ttl: { type: 'string' },
    duration: { type: 'string', default: '60s' },
    seed: { type: 'string' },
    candidates: { type: 'string' },
    faults: { type: 'string' },
    'bypass-fencing': { type: 'boolean', default: false },
    out: { type: 'string', default: 'chaos-results' },
    record: { type: 'boolean', default: false },
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
    found += result.violations.length + (saved.crashes?.length ?? 0);
  }
  process.exit(found > 0 ? 1 : 0);
}

const backends = values.backend === 'all' ? BACKENDS : (values.backend!.split(',') as Backend[]);
for (const b of backends) if (!BACKENDS.includes(b)) throw new ConfigError('backend', `must be all or one of ${BACKENDS.join(', ')}, got ${b}`);
const durationMs = parseDuration('duration', values.duration!);
const seed = values.seed === undefined ? Math.floor(Math.random() * 2 ** 31) : Number(values.seed);
let violations = 0;
const loadBefore = loadavg().map((l) => l.toFixed(1)).join(' / ');

/** `--record`: appends the run (its command, the commit, the load, what it printed) to chaos/RESULTS.md. */
function record(backend: string, summary: string, load: string): void {
  let commit = 'unknown';
  try {
    commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim();
  } catch {
    // not a git checkout
  }
  const args = process.argv.slice(2).filter((a) => a !== '--record');
  const backendArgs = args.map((a, i) => (args[i - 1] === '--backend' ? backend : a));
  const block = `\n\`npm run chaos -- ${backendArgs.join(' ')}\` (commit ${commit}; load average (1/5/15 min) before ${load}, after ${loadavg().map((l) => l.toFixed(1)).join(' / ')})\n\n\`\`\`\n${summary}\n\`\`\`\n`;
  appendFileSync(new URL('./RESULTS.md', import.meta.url), block);
}

for (const backend of backends) {
  const historyFile = join(values.out!, `${backend}-${seed}${values.kind === 'recipe' ? '' : `-${values.kind}`}${values['bypass-fencing'] ? '-bypassed' : ''}.json`);
  const report = await runChaos({
    backend,
    kind: values.kind as WorkloadKind,
    durationMs,
    seed,
    ...(values.candidates ? { candidates: Number(values.candidates) } : {}),
    ...(values.shards ? { shards: Number(values.shards) } : {}),
    ...(values.ttl ? { ttlMs: parseDuration('ttl', values.ttl) } : {}),
    ...(values.faults ? { faults: values.faults.split(',') } : {}),
    bypassFencing: values['bypass-fencing'],
    historyFile,
    log: values.quiet ? undefined : (line) => console.log(line),
  });
  console.log(summarize(report, historyFile));
  violations += report.result.violations.length + report.crashes.length;
  if (values.record) record(backend, summarize(report, historyFile), loadBefore);
}
if (values['bypass-fencing']) console.log(`fencing was bypassed: ${violations} violations found (the checker must find some)`);
process.exit(violations > 0 ? 1 : 0);
