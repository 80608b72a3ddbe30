/**
 * The benchmark harness: each backend's file under bench/ exports `cases`, a list of
 * BenchCase; `npm run bench` runs them (or those whose group matches argv) and writes a table to
 * stdout and to bench/RESULTS.md. Numbers are measured on real servers from tenure/testing.
 */
import { readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';

export interface BenchRow {
  /** e.g. 'etcd mutex' */
  group: string;
  /** e.g. 'uncontended acquire+release' */
  scenario: string;
  /** e.g. 'tenure EtcdMutex' or 'etcd3 Lock' */
  impl: string;
  opsPerSec?: number;
  p50Ms?: number;
  p99Ms?: number;
  /** Anything else worth a column: fairness, failover time, … */
  notes?: string;
  /**
   * ops/s of every kept round, in the order run. Rounds are interleaved, so a peer's round i ran
   * beside tenure's round i under the same load: with both rows' rounds, the ratio is also given
   * round by round (its median and range), which drift between rounds does not widen.
   */
  opsPerRound?: number[];
}

export interface BenchCase {
  group: string;
  /** The groups of its rows, when they are not `group` (a filter word may name one of them). */
  rowGroups?: readonly string[];
  /** Runs the case and returns its rows. Must start and stop its own servers. */
  run(opts: { durationMs: number }): Promise<BenchRow[]>;
}

/**
 * Percentile (0–100) of a sample, in its units: the nearest rank of the sorted raw sample. Not
 * `perf_hooks.createHistogram`: fed the same samples (in ns), its figures differ — by its buckets'
 * 3 significant digits (median 0.05 %) and, on small samples, by its rank rule (the p99 of 63
 * samples: 68 ms where the sample's is 141 ms) — so the bench's figures would change.
 */
export function percentile(sample: number[], p: number): number {
  if (sample.length === 0) return NaN;
  const s = [...sample].sort((a, b) => a - b);
  const i = Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1));
  return s[i]!;
}

/** Untimed calls before a round's timed ones: a fresh client's first requests (streams, lazy set-up) are not the cycle. */
export const warmupMs = (durationMs: number): number => Math.min(500, durationMs / 10);

/**
 * Calls `op` back to back for `warmupMs(durationMs)` untimed, then for `durationMs`; returns
 * ops/s and latency percentiles of the timed calls, their `count`, and `calls`: every call made,
 * the untimed ones included — what a count read at the server over the whole loop divides by.
 * `cpuUsPerCall`: this process's CPU time (user + system) per timed call, the client's work per
 * cycle, which the server's and the link's share of a cycle does not blur.
 */
export async function timeLoop(op: () => Promise<unknown>, durationMs: number): Promise<{ opsPerSec: number; p50Ms: number; p99Ms: number; count: number; calls: number; cpuUsPerCall: number }> {
  const warm = performance.now() + warmupMs(durationMs);
  let untimed = 0;
  for (; performance.now() < warm; untimed++) await op();
  const lat: number[] = [];
  const cpu0 = process.cpuUsage();
  const start = performance.now();
  const end = start + durationMs;
  while (performance.now() < end) {
    const t = performance.now();
    await op();
    lat.push(performance.now() - t);
  }
  const elapsed = (performance.now() - start) / 1000;
  const cpu = process.cpuUsage(cpu0);
  return { opsPerSec: lat.length / elapsed, p50Ms: percentile(lat, 50), p99Ms: percentile(lat, 99), count: lat.length, calls: untimed + lat.length, cpuUsPerCall: (cpu.user + cpu.system) / lat.length };
}

/** The rounds of one implementation: the median round (by the measure's key) and every key. */
export interface Rounds<T> {
  median: T;
  /** Every kept round's key, sorted. */
  keys: number[];
  /** Every kept round, in the order run (round i of every implementation ran side by side). */
  all: T[];
}

/** Rounds per measurement: every group interleaves its implementations this many times. */
export const ROUNDS = 5;
/** Rounds run first and discarded (JIT, first connections, the server's caches). */
export const WARMUP_ROUNDS = 1;

/**
 * Runs `measure` for every implementation in turn, `warmup` rounds discarded and then `rounds`
 * kept, so load drifting on a shared machine hits every implementation alike; returns, per
 * implementation, the round with the median `key` and every kept round's key (the spread).
 * Measurements that are not warm-up bound (a crash's failover, a big queue) pass fewer rounds.
 */
export async function interleaved<T>(
  impls: readonly string[],
  measure: (impl: string, round: number) => Promise<T>,
  key: (r: T) => number,
  { rounds = ROUNDS, warmup = WARMUP_ROUNDS }: { rounds?: number; warmup?: number } = {},
): Promise<Map<string, Rounds<T>>> {
  const all = new Map<string, T[]>(impls.map((i) => [i, []]));
  for (let r = 0; r < warmup; r++) for (const impl of impls) await measure(impl, -1 - r);
  for (let r = 0; r < rounds; r++) for (const impl of impls) all.get(impl)!.push(await measure(impl, r));
  const out = new Map<string, Rounds<T>>();
  for (const [impl, rs] of all) {
    const sorted = [...rs].sort((a, b) => key(a) - key(b));
    out.set(impl, { median: sorted[Math.floor(sorted.length / 2)]!, keys: sorted.map(key), all: rs });
  }
  return out;
}

/**
 * "median of 5 rounds (ops/s 581/650/700/720/838; ±5 %)": every round's key and the half
 * interquartile range relative to the median (with 5 rounds: the 2nd and 4th), for a row's notes.
 * Two medians closer than their ± are not a measured difference.
 */
export function spread(keys: number[], unit: string): string {
  const f = (n: number): string => (n >= 100 ? n.toFixed(0) : n.toFixed(2));
  const s = [...keys].sort((a, b) => a - b);
  const mid = median(s);
  const q = (p: number): number => s[Math.min(s.length - 1, Math.max(0, Math.round(p * (s.length - 1))))]!;
  const iqr = s.length >= 3 && mid > 0 ? `; ±${((50 * (q(0.75) - q(0.25))) / mid).toFixed(0)} %` : '';
  return `median of ${keys.length} rounds (${unit} ${s.map(f).join('/')}${iqr})`;
}

/** The middle value (of an odd count; the upper middle of an even one), as `interleaved` picks its median round. */
export function median(xs: number[]): number {
  return [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
}

/** "client CPU 24.1 µs per cycle (23.5–25.0)": the median and range of a CPU time per operation (timeLoop's cpuUsPerCall) over the rounds; `who` and `per` name whose CPU and which operation. */
export function cpuNote(perRound: number[], who = 'client', per = 'cycle'): string {
  return `${who} CPU ${median(perRound).toFixed(1)} µs per ${per} (${Math.min(...perRound).toFixed(1)}–${Math.max(...perRound).toFixed(1)})`;
}

/** CPU time (user + system, µs) process `pid` has used so far: /proc/<pid>/stat, in clock ticks of 10 ms (sum a whole round, not a call). */
export function processCpuUs(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' '); // from field 3 (state) on
  return (Number(fields[11]) + Number(fields[12])) * 10_000; // utime, stime
}

/** Joins note fragments, skipping empty ones. */
export function notes(...parts: (string | undefined | false)[]): string {
  return parts.filter((p): p is string => typeof p === 'string' && p.length > 0).join('; ');
}

/**
 * tenure/peer for a tenure row against each peer row of the same group and scenario: ops/s
 * (higher is better) and p50 (lower is better).
 */
function ratios(row: BenchRow, rows: BenchRow[]): string {
  if (!row.impl.startsWith('tenure')) return '';
  const peers = rows.filter((r) => r.group === row.group && r.scenario === row.scenario && !r.impl.startsWith('tenure'));
  const x = (a: number | undefined, b: number | undefined): string | undefined => (a !== undefined && b !== undefined && b > 0 && !Number.isNaN(a) && !Number.isNaN(b) ? `${(a / b).toFixed(2)}×` : undefined);
  return peers
    .map((p) => {
      const parts = [x(row.opsPerSec, p.opsPerSec) && `ops/s ${x(row.opsPerSec, p.opsPerSec)}`, perRound(row.opsPerRound, p.opsPerRound), x(row.p50Ms, p.p50Ms) && `p50 ${x(row.p50Ms, p.p50Ms)}`, x(row.p99Ms, p.p99Ms) && `p99 ${x(row.p99Ms, p.p99Ms)}`].filter(Boolean);
      return parts.length > 0 ? `vs ${p.impl}: ${parts.join(', ')}` : '';
    })
    .filter(Boolean)
    .join('<br>');
}

/** "round by round 0.93× (0.90–0.97×)": the median and range of the ratios of rounds run side by side. */
function perRound(mine: number[] | undefined, theirs: number[] | undefined): string | undefined {
  if (!mine || !theirs || mine.length !== theirs.length || mine.length < 3 || theirs.some((t) => !(t > 0))) return undefined;
  const r = mine.map((m, i) => m / theirs[i]!);
  return `round by round ${median(r).toFixed(2)}× (${Math.min(...r).toFixed(2)}–${Math.max(...r).toFixed(2)}×)`;
}

/** Formats rows as a Markdown table, with tenure/peer ratios. */
export function table(rows: BenchRow[]): string {
  const f = (n: number | undefined, d = 2): string => (n === undefined || Number.isNaN(n) ? '' : n >= 100 ? n.toFixed(0) : n.toFixed(d));
  const lines = ['| group | scenario | implementation | ops/s | p50 ms | p99 ms | tenure/peer | notes |', '| --- | --- | --- | ---: | ---: | ---: | --- | --- |'];
  for (const r of rows) lines.push(`| ${r.group} | ${r.scenario} | ${r.impl} | ${f(r.opsPerSec, 1)} | ${f(r.p50Ms)} | ${f(r.p99Ms)} | ${ratios(r, rows)} | ${r.notes ?? ''} |`);
  return lines.join('\n');
}
