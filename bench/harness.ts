/**
 * The benchmark harness: each backend's file under bench/ exports `cases`, a list of
 * BenchCase; `npm run bench` runs them (or those whose group matches argv) and writes a table to
 * stdout and to bench/RESULTS.md. Numbers are measured on real servers from tenure/testing.
 */
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
}

export interface BenchCase {
  group: string;
  /** Runs the case and returns its rows. Must start and stop its own servers. */
  run(opts: { durationMs: number }): Promise<BenchRow[]>;
}

/** Percentile (0–100) of a sample, in its units. */
export function percentile(sample: number[], p: number): number {
  if (sample.length === 0) return NaN;
  const s = [...sample].sort((a, b) => a - b);
  const i = Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1));
  return s[i]!;
}

/** Calls `op` back to back for `durationMs`; returns ops/s and latency percentiles. */
export async function timeLoop(op: () => Promise<unknown>, durationMs: number): Promise<{ opsPerSec: number; p50Ms: number; p99Ms: number; count: number }> {
  const lat: number[] = [];
  const start = performance.now();
  const end = start + durationMs;
  while (performance.now() < end) {
    const t = performance.now();
    await op();
    lat.push(performance.now() - t);
  }
  const elapsed = (performance.now() - start) / 1000;
  return { opsPerSec: lat.length / elapsed, p50Ms: percentile(lat, 50), p99Ms: percentile(lat, 99), count: lat.length };
}

/** Formats rows as a Markdown table. */
export function table(rows: BenchRow[]): string {
  const f = (n: number | undefined, d = 2): string => (n === undefined || Number.isNaN(n) ? '' : n >= 100 ? n.toFixed(0) : n.toFixed(d));
  const lines = ['| group | scenario | implementation | ops/s | p50 ms | p99 ms | notes |', '| --- | --- | --- | ---: | ---: | ---: | --- |'];
  for (const r of rows) lines.push(`| ${r.group} | ${r.scenario} | ${r.impl} | ${f(r.opsPerSec, 1)} | ${f(r.p50Ms)} | ${f(r.p99Ms)} | ${r.notes ?? ''} |`);
  return lines.join('\n');
}
