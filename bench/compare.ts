/**
 * `npm run bench:compare -- --base REV [--base REV…] [--runs N] [--duration ms] [group…]`: the
 * before/after check of a change. Runs `bench/run.ts` on the given groups in a temporary worktree
 * of each base commit and in this tree, interleaved (every base, then this tree; `--runs` times,
 * default 3), so load drifting on the machine hits every side alike; then prints, for every
 * tenure row this tree shares with a base, this tree's figures as ratios of the base's (medians
 * over the runs): ops/s here/base, p50 and p99 base/here, so above 1× favours this tree. Each run
 * is a whole `bench/run.ts` process with its own servers, as `npm run bench` would run it there.
 * Writes the table to .bench-results/compare-<bases>.md too.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { parseArgs } from 'node:util';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const { values, positionals: groups } = (() => {
  try {
    return parseArgs({ options: { base: { type: 'string', multiple: true, default: [] }, runs: { type: 'string', default: '3' }, duration: { type: 'string', default: '3000' } }, allowPositionals: true });
  } catch (e) {
    usage((e as Error).message);
  }
})();
const bases = values.base;
const runs = Number(values.runs);
const durationMs = Number(values.duration);
if (bases.length === 0) usage('at least one --base REV');
if (!Number.isInteger(runs) || runs < 1) usage('--runs takes a whole number ≥ 1');
if (!(durationMs > 0)) usage('--duration takes a number of ms > 0');

function usage(why: string): never {
  console.error(`bench:compare: ${why}\nusage: npm run bench:compare -- --base REV [--base REV…] [--runs N] [--duration ms] [group…]`);
  process.exit(2);
}

type Figures = [opsPerSec: number | undefined, p50Ms: number | undefined, p99Ms: number | undefined];
/** One run's tenure rows, keyed by group, scenario (its leading words: scenarios were renamed) and implementation. */
type Run = Map<string, Figures>;

/** The scenario's leading words, so a row renamed since the base ("handoff: …" → "hand-off …") still pairs. */
const scenarioKey = (s: string): string => s.toLowerCase().replace('handoff', 'hand-off').split(/[,(:]/)[0]!.trim();

/** The tenure rows of a `bench/run.ts` Markdown table, by header names (the columns changed over time). */
function parse(table: string): Run {
  const run: Run = new Map();
  let head: string[] | undefined;
  for (const line of table.split('\n')) {
    if (!line.startsWith('| ')) continue;
    const cells = line.slice(1, -1).split('|').map((c) => c.trim());
    if (cells[0] === 'group') {
      head = cells;
      continue;
    }
    if (!head || cells[0]?.startsWith('---') || !cells[2]?.startsWith('tenure')) continue;
    const num = (name: string): number | undefined => {
      const v = cells[head!.indexOf(name)];
      return v !== undefined && /^\d+(\.\d+)?$/.test(v) ? Number(v) : undefined;
    };
    run.set(`${cells[0]} | ${scenarioKey(cells[1]!)} | ${cells[2]}`, [num('ops/s'), num('p50 ms'), num('p99 ms')]);
  }
  return run;
}

function benchIn(dir: string): Run {
  const r = spawnSync(process.execPath, ['--import', 'tsx', 'bench/run.ts', ...groups, '--duration', String(durationMs)], { cwd: dir, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'], maxBuffer: 64 << 20 });
  if (r.status !== 0) throw new Error(`bench/run.ts in ${dir} exited ${r.status ?? r.signal}`);
  return parse(r.stdout);
}

const worktrees = bases.map((rev) => {
  const dir = mkdtempSync(join(tmpdir(), 'tenure-bench-'));
  execFileSync('git', ['worktree', 'add', '--detach', dir, rev], { cwd: root, stdio: 'ignore' });
  symlinkSync(join(root, 'node_modules'), join(dir, 'node_modules'));
  return { rev, dir, runs: [] as Run[] };
});
const here: Run[] = [];
try {
  for (let i = 1; i <= runs; i++) {
    for (const w of worktrees) {
      console.error(`bench:compare: run ${i}/${runs} at ${w.rev} …`);
      w.runs.push(benchIn(w.dir));
    }
    console.error(`bench:compare: run ${i}/${runs} in this tree …`);
    here.push(benchIn(root));
  }
} finally {
  for (const w of worktrees) execFileSync('git', ['worktree', 'remove', '--force', w.dir], { cwd: root, stdio: 'ignore' });
}

const median = (xs: number[]): number | undefined => (xs.length === 0 ? undefined : [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]);
const figure = (rs: Run[], key: string, i: number): number | undefined => median(rs.map((r) => r.get(key)?.[i]).filter((v): v is number => v !== undefined));
const ratio = (a: number | undefined, b: number | undefined): string => (a !== undefined && b !== undefined && b > 0 ? `${(a / b).toFixed(2)}×` : '–');
const perRun = (rs: Run[], key: string): string => rs.map((r) => r.get(key)?.[0]?.toFixed(0) ?? '–').join('/');

const lines = [
  `# bench:compare — this tree against ${bases.join(', ')}`,
  '',
  `${runs} interleaved runs of \`bench/run.ts ${groups.join(' ')}\` (${durationMs} ms per round) per side; medians over the runs. Ratios favour this tree above 1×: ops/s here/base, p50 and p99 base/here.`,
  '',
  `| group | scenario | implementation | ${bases.map((b) => `vs ${b}: ops/s, p50, p99`).join(' | ')} | ops/s per run: ${[...bases, 'here'].join(' · ')} |`,
  `| --- | --- | --- | ${bases.map(() => '---').join(' | ')} | --- |`,
];
for (const key of here[0]!.keys()) {
  const cells = worktrees.map((w) => [ratio(figure(here, key, 0), figure(w.runs, key, 0)), ratio(figure(w.runs, key, 1), figure(here, key, 1)), ratio(figure(w.runs, key, 2), figure(here, key, 2))].join(', '));
  lines.push(`| ${key} | ${cells.join(' | ')} | ${[...worktrees.map((w) => perRun(w.runs, key)), perRun(here, key)].join(' · ')} |`);
}
const out = lines.join('\n') + '\n';
const target = join(root, '.bench-results', `compare-${bases.join('-')}.md`);
mkdirSync(dirname(target), { recursive: true });
writeFileSync(target, out);
console.log(out);
console.error(`bench:compare: wrote ${target}`);
