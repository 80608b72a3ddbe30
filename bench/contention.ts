/**
 * Shared measurements for lock benchmarks: n contenders looping acquire → release, and the
 * hand-off time from a release to the next waiter's grant. Each contender brings its own
 * connection(s); all run in this process (a 2-core machine; the servers take the other core).
 */
import { performance } from 'node:perf_hooks';
import { notes, percentile, type BenchRow } from './harness.js';

/** Takes the lock; resolves with the function that releases it. */
export type Acquire = () => Promise<() => Promise<unknown>>;

export interface ContentionResult {
  opsPerSec: number;
  waitP50: number;
  waitP99: number;
  waitP999: number;
  min: number;
  max: number;
}

export async function contend(acquires: Acquire[], durationMs: number): Promise<ContentionResult> {
  const waits: number[] = [];
  const counts = acquires.map(() => 0);
  const start = performance.now();
  const end = start + durationMs;
  await Promise.all(
    acquires.map(async (acquire, i) => {
      while (performance.now() < end) {
        const t = performance.now();
        const release = await acquire();
        waits.push(performance.now() - t);
        counts[i]!++;
        await release();
      }
    }),
  );
  const elapsed = (performance.now() - start) / 1000;
  return {
    opsPerSec: waits.length / elapsed,
    waitP50: percentile(waits, 50),
    waitP99: percentile(waits, 99),
    waitP999: percentile(waits, 99.9),
    min: Math.min(...counts),
    max: Math.max(...counts),
  };
}

/**
 * Hand-off latency: `a` holds, `b` is already waiting; time from the start of `a`'s release to
 * `b`'s grant. Alternates roles; at least 5 samples, then until `durationMs` has passed.
 */
export async function handoff(a: Acquire, b: Acquire, durationMs: number): Promise<{ p50: number; p99: number; samples: number }> {
  const samples: number[] = [];
  const end = performance.now() + durationMs;
  let [holder, waiter] = [a, b];
  while (samples.length < 5 || performance.now() < end) {
    const release = await holder();
    let granted = 0;
    const waiting = waiter().then((r) => {
      granted = performance.now();
      return r;
    });
    await new Promise((r) => setTimeout(r, 30)); // the waiter is surely waiting now
    const t0 = performance.now();
    await release();
    const releaseNext = await waiting;
    samples.push(granted - t0);
    await releaseNext();
    [holder, waiter] = [waiter, holder];
    if (samples.length >= 200) break;
  }
  return { p50: percentile(samples, 50), p99: percentile(samples, 99), samples: samples.length };
}

/** The table row for a 10-contender result. */
export function contentionRow(group: string, impl: string, c: ContentionResult, extra?: string): BenchRow {
  return {
    group,
    scenario: '10 contenders (wait time)',
    impl,
    opsPerSec: c.opsPerSec,
    p50Ms: c.waitP50,
    p99Ms: c.waitP99,
    notes: notes(`p99.9 ${c.waitP999.toFixed(1)} ms; per-contender min/max ${c.min}/${c.max}`, extra),
  };
}
