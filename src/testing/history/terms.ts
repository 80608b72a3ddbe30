import type { HistoryOp, HistoryTerm } from './types.js';

/** Orders entries by their monotonic stamp; entries with equal stamps keep their order. */
export function byTime(a: { t: bigint }, b: { t: bigint }): number {
  return a.t < b.t ? -1 : a.t > b.t ? 1 : 0;
}

const key = (process: string, fence: bigint): string => `${process}|${fence}`;

/**
 * Rebuilds every term from a history, each from its grant (`acquire` ok) to its end **by the
 * holder's own log**: the first of its `term-end`, its last reported local deadline, and its
 * process's crash (`kill` fault). The deadline matters for a paused holder: it reports the end
 * only after it runs again, but its lease was over at the deadline, which it had reported before.
 */
export function reconstructTerms(ops: readonly HistoryOp[]): HistoryTerm[] {
  const sorted = [...ops].sort(byTime);
  const historyEnd = sorted.at(-1)?.t ?? 0n;
  const terms: HistoryTerm[] = [];
  const open = new Map<string, { term: HistoryTerm; deadline?: bigint }>();
  const close = (k: string, t: bigint, why: string): void => {
    const entry = open.get(k);
    if (!entry) return;
    open.delete(k);
    const d = entry.deadline;
    if (d !== undefined && d < t) {
      entry.term.end = d;
      entry.term.endedBy = 'deadline';
    } else {
      entry.term.end = t;
      entry.term.endedBy = why;
    }
  };
  for (const op of sorted) {
    if (op.f === 'acquire' && op.type === 'ok' && op.fence !== undefined) {
      const k = key(op.process, op.fence);
      close(k, op.t, 'regranted');
      const term: HistoryTerm = { process: op.process, fence: op.fence, start: op.t, end: historyEnd, endedBy: 'open' };
      terms.push(term);
      open.set(k, { term });
    } else if (op.f === 'deadline' && op.fence !== undefined && op.deadline !== undefined) {
      const entry = open.get(key(op.process, op.fence));
      if (entry && (entry.deadline === undefined || op.deadline > entry.deadline)) entry.deadline = op.deadline;
    } else if (op.f === 'term-end' && op.fence !== undefined) {
      close(key(op.process, op.fence), op.t, op.error ?? 'ended');
    } else if (op.f === 'fault' && op.fault === 'kill' && op.phase !== 'end' && op.target !== undefined) {
      for (const [k, entry] of [...open]) if (entry.term.process === op.target) close(k, op.t, 'crash');
    }
  }
  for (const k of [...open.keys()]) close(k, historyEnd, 'open');
  return terms.sort((a, b) => byTime({ t: a.start }, { t: b.start }));
}

/** The pause intervals of each process (`pause` faults), open ones running to the history's end. */
export function pauses(ops: readonly HistoryOp[]): Map<string, { from: bigint; to: bigint }[]> {
  const sorted = [...ops].sort(byTime);
  const end = sorted.at(-1)?.t ?? 0n;
  const out = new Map<string, { from: bigint; to: bigint }[]>();
  const started = new Map<string, bigint>();
  for (const op of sorted) {
    if (op.f !== 'fault' || op.fault !== 'pause' || op.target === undefined) continue;
    if (op.phase === 'end') {
      const from = started.get(op.target);
      if (from === undefined) continue;
      started.delete(op.target);
      out.set(op.target, [...(out.get(op.target) ?? []), { from, to: op.t }]);
    } else {
      started.set(op.target, op.t);
    }
  }
  for (const [p, from] of started) out.set(p, [...(out.get(p) ?? []), { from, to: end }]);
  return out;
}
