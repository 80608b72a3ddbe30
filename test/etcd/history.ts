import type { WorkerEvent, WorkerHandle } from '../../src/testing/index.js';

/** One leadership term as reported by a candidate process (stamps in ns, CLOCK_MONOTONIC). */
export interface TermRecord {
  pid: number;
  fence: bigint;
  start: bigint;
  /** When the holder stopped: its lost/resigned report or its local deadline, whichever came first. */
  end: bigint | undefined;
  reason: string | undefined;
}

/** Every term every worker reported, in fence order. */
export function terms(workers: WorkerHandle[]): TermRecord[] {
  const out: TermRecord[] = [];
  for (const w of workers) {
    const evs = w.events as WorkerEvent<Record<string, string>>[];
    for (const e of evs) {
      if (e.type !== 'elected') continue;
      const fence = BigInt(e.data.fence!);
      const endEv = evs.find((x) => x.type === 'lost' && x.data.fence === e.data.fence);
      let end = endEv?.t;
      if (endEv?.data.deadlineNs) {
        const d = BigInt(endEv.data.deadlineNs);
        if (end === undefined || d < end) end = d;
      }
      out.push({ pid: w.pid, fence, start: e.t, end, reason: endEv?.data.reason });
    }
  }
  return out.sort((a, b) => (a.fence < b.fence ? -1 : 1));
}

/**
 * Asserts the invariant: terms never overlap (each holder stopped before the next was elected)
 * and fences strictly increase. A killed holder (no end) must be followed by a term that starts
 * after `killedAt` (its process was gone). Returns a description of any violation, or undefined.
 */
export function overlap(ts: TermRecord[], killed: Map<number, bigint> = new Map()): string | undefined {
  for (let i = 1; i < ts.length; i++) {
    const prev = ts[i - 1]!;
    const next = ts[i]!;
    if (next.fence <= prev.fence) return `fence ${next.fence} not above ${prev.fence}`;
    const end = prev.end ?? killed.get(prev.pid);
    if (end === undefined) return `term ${prev.fence} (pid ${prev.pid}) never ended but ${next.fence} began`;
    if (end >= next.start) return `term ${prev.fence} ended ${(Number(end - next.start) / 1e6).toFixed(1)} ms after term ${next.fence} began`;
  }
  return undefined;
}

/** ms between two ns stamps. */
export function ms(from: bigint, to: bigint): number {
  return Number(to - from) / 1e6;
}
