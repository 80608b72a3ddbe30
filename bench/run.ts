/**
 * `npm run bench [filter…] [--duration ms-per-round]`: runs every bench/*.bench.ts case (or those whose
 * group, or one of its rows' groups, contains a filter word), prints one table and writes it to bench/RESULTS.md (a full run:
 * the header and the table are replaced, the hand-written `## ` sections below them kept) or
 * .bench-results/ (a filtered one).
 *
 * Every case runs in a Node process of its own (this script again, with `--case file#index`):
 * a group that opens thousands of sessions leaves garbage, timers and a grown heap behind, and
 * the group after it in the same process measured up to 45 % slower than alone.
 *
 * tenure is measured from its build (`dist/`, as npm users run it): `npm run bench` builds first and
 * loads bench/dist-hooks.mjs, which its case processes inherit.
 */
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { cpus, loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import { spawn } from 'node:child_process';
import { ROUNDS, WARMUP_ROUNDS, table, warmupMs, type BenchCase, type BenchRow } from './harness.js';

const here = dirname(fileURLToPath(import.meta.url));
const { values, positionals: filters } = (() => {
  try {
    return parseArgs({ options: { duration: { type: 'string', default: '3000' }, case: { type: 'string' }, rows: { type: 'string' } }, allowPositionals: true });
  } catch (e) {
    console.error(`bench: ${(e as Error).message}\nusage: npm run bench -- [filter…] [--duration ms-per-round]`);
    process.exit(2);
  }
})();
const durationMs = Number(values.duration);
if (!(durationMs > 0)) {
  console.error('bench: --duration takes a number of ms > 0');
  process.exit(2);
}

if (values.case !== undefined) {
  // A child: run one case, write its rows (JSON) where the parent said.
  const [file, index] = values.case.split('#');
  const mod = (await import(pathToFileURL(join(here, file!)).href)) as { cases: BenchCase[] };
  try {
    writeFileSync(values.rows!, JSON.stringify({ rows: await mod.cases[Number(index)]!.run({ durationMs }) }));
  } catch (e) {
    console.error(e);
    writeFileSync(values.rows!, JSON.stringify({ error: String(e instanceof Error ? e.message : e) }));
  }
  process.exit(0);
}

/** Runs case `index` of `file` in a child process; its rows, or its failure as an error. */
async function inChild(file: string, index: number): Promise<BenchRow[]> {
  const rowsAt = join(here, '..', '.bench-results', `rows-${process.pid}-${file}-${index}.json`);
  mkdirSync(dirname(rowsAt), { recursive: true });
  const child = spawn(process.execPath, [...process.execArgv, fileURLToPath(import.meta.url), '--case', `${file}#${index}`, '--rows', rowsAt, '--duration', String(durationMs)], { stdio: ['ignore', 'inherit', 'inherit'] });
  const code = await new Promise<number | null>((resolve) => child.on('exit', (c, sig) => resolve(c ?? (sig ? -1 : null))));
  try {
    if (code !== 0) throw new Error(`its process exited with ${code}`);
    // (JSON has no NaN or undefined: a figure the case did not have comes back as null)
    const out = JSON.parse(readFileSync(rowsAt, 'utf8'), (_k, v: unknown) => (v === null ? undefined : v)) as { rows?: BenchRow[]; error?: string };
    if (out.error !== undefined) throw new Error(out.error);
    return out.rows!;
  } finally {
    rmSync(rowsAt, { force: true });
  }
}

// In name order, but the 10,000-participant group last: its aftermath (the WAL of an etcd that
// held 10,000 sessions written back to disk, a 1 GiB ZooKeeper heap freed) fell on the groups after
// it in name order (scale-out, scale, zk), which measure other things.
const HEAVIEST = 'scale-10k.bench.ts';
const files = readdirSync(here)
  .filter((f) => f.endsWith('.bench.ts'))
  .sort((a, b) => Number(a === HEAVIEST) - Number(b === HEAVIEST) || a.localeCompare(b));
if (files.length === 0) {
  console.error('bench: no bench/*.bench.ts files');
  process.exit(2);
}
const rows: BenchRow[] = [];
const load = (): string => loadavg().map((l) => l.toFixed(2)).join(' / ');
const loadBefore = load();
const started = performance.now();
for (const f of files) {
  const mod = (await import(pathToFileURL(join(here, f)).href)) as { cases: BenchCase[] };
  for (const [index, c] of mod.cases.entries()) {
    if (filters.length > 0 && !filters.some((w) => [c.group, ...(c.rowGroups ?? [])].some((g) => g.includes(w)))) continue;
    console.error(`bench: ${c.group} …`);
    try {
      rows.push(...(await inChild(f, index)));
    } catch (e) {
      // One failing group must not lose the others' figures: its failure is a row of its own.
      console.error(`bench: ${c.group} failed:`, (e as Error).message);
      rows.push({ group: c.group, scenario: 'FAILED', impl: '-', notes: String(e instanceof Error ? e.message : e).replace(/\|/g, '/').slice(0, 300) });
    }
  }
}
/** Says where tenure's code came from: its build when bench/dist-hooks.mjs is loaded. */
function distNote(): string {
  return process.execArgv.some((a) => a.includes('dist-hooks')) ? "; tenure's code from its build (dist/)" : "; tenure's code from src/ through tsx (not its build)";
}
const minutes = ((performance.now() - started) / 60_000).toFixed(1);
const out = `# tenure benchmarks\n\nMachine: ${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}, Node ${process.version}; ${durationMs} ms per round (after ${warmupMs(durationMs)} ms of untimed calls), every implementation interleaved over ${ROUNDS} rounds after ${WARMUP_ROUNDS} discarded warm-up round (median shown; every round and ± half the interquartile range in notes), loopback, real servers from tenure/testing${distNote()}. Load average (1/5/15 min) before: ${loadBefore}, after: ${load()}; ${minutes} min.${filters.length > 0 ? ` Groups: ${filters.join(', ')}.` : ''}\n\nRatios are tenure/peer: ops/s above 1× and p50/p99 below 1× favour tenure.\n\n${table(rows)}\n`;
// Only a full run replaces bench/RESULTS.md; a filtered run goes to .bench-results/ (not committed).
const target = filters.length > 0 ? join(here, '..', '.bench-results', `${filters.join('-').replace(/[^\w-]/g, '_')}.md`) : join(here, 'RESULTS.md');
mkdirSync(dirname(target), { recursive: true });
// The sections written by hand below the table (targets met or missed, definitions, the
// before/after runs) stay: a full run replaces the header and the table only.
const previous = filters.length > 0 ? '' : (() => {
  try {
    return readFileSync(target, 'utf8');
  } catch {
    return '';
  }
})();
const notesAt = previous.indexOf('\n## ');
writeFileSync(target, notesAt >= 0 ? `${out}${previous.slice(notesAt)}` : out);
console.log(out);
console.error(`bench: wrote ${target}`);
process.exit(0);
