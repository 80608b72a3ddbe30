import { ConfigError } from '../../core/errors.js';
import { requireNumber, requireObject, requireOptions } from '../../core/validate.js';
import { mergeShards, shardParts, type OneCheck } from './shards.js';
import { byTime, pauses, reconstructTerms } from './terms.js';
import type { CheckOptions, CheckResult, CheckStats, Failover, History, HistoryOp, HistoryTerm, RegisterEntry, Violation } from './types.js';

/** A write with its invocation and completion. */
interface Write {
  process: string;
  register: string;
  id: string;
  fence: bigint;
  invoke: bigint;
  end?: HistoryOp;
}

const ms = (ns: bigint): number => Number(ns) / 1e6;

function writesOf(sorted: readonly HistoryOp[]): Write[] {
  const pending = new Map<string, Write>();
  const out: Write[] = [];
  for (const op of sorted) {
    if (op.f !== 'write' || op.id === undefined) continue;
    const k = `${op.process}|${op.id}`;
    if (op.type === 'invoke') {
      const w: Write = { process: op.process, register: op.register ?? '', id: op.id, fence: op.fence ?? -1n, invoke: op.t };
      pending.set(k, w);
      out.push(w);
    } else {
      const w = pending.get(k);
      if (w && !w.end) w.end = op;
      pending.delete(k);
    }
  }
  return out;
}

/** Per register, acknowledged writes by completion time, with the running maximum fence. */
function ackIndex(writes: readonly Write[]): Map<string, { t: bigint[]; max: bigint[]; id: string[] }> {
  const by = new Map<string, Write[]>();
  for (const w of writes) if (w.end?.type === 'ok') by.set(w.register, [...(by.get(w.register) ?? []), w]);
  const out = new Map<string, { t: bigint[]; max: bigint[]; id: string[] }>();
  for (const [r, ws] of by) {
    ws.sort((a, b) => byTime(a.end!, b.end!));
    const idx = { t: [] as bigint[], max: [] as bigint[], id: [] as string[] };
    let max = -1n;
    let maxId = '';
    for (const w of ws) {
      if (w.fence > max) [max, maxId] = [w.fence, w.id];
      idx.t.push(w.end!.t);
      idx.max.push(max);
      idx.id.push(maxId);
    }
    out.set(r, idx);
  }
  return out;
}

/** The highest fence acknowledged to `register` strictly before `t`, and the write that carried it. */
function highestAckedBefore(index: ReturnType<typeof ackIndex>, register: string, t: bigint): { fence: bigint; id: string } | undefined {
  const idx = index.get(register);
  if (!idx) return undefined;
  let lo = 0;
  let hi = idx.t.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (idx.t[mid]! < t) lo = mid + 1;
    else hi = mid;
  }
  return lo === 0 ? undefined : { fence: idx.max[lo - 1]!, id: idx.id[lo - 1]! };
}

function stats(sorted: readonly HistoryOp[], terms: readonly HistoryTerm[]): CheckStats {
  const s: CheckStats = { operations: {}, staleRejected: 0, writesAcknowledged: 0, terms: terms.length, termsByProcess: {}, faults: {}, failovers: [], survived: {}, excusedOverlaps: 0 };
  for (const op of sorted) {
    if (op.f === 'fault') {
      if (op.phase !== 'end' && op.fault) s.faults[op.fault] = (s.faults[op.fault] ?? 0) + 1;
      continue;
    }
    if (op.f !== 'acquire' && op.f !== 'write' && op.f !== 'release') continue;
    const o = (s.operations[op.f] ??= { invoked: 0, ok: 0, fail: 0, info: 0 });
    if (op.type === 'invoke') o.invoked++;
    else o[op.type]++;
    if (op.f === 'write' && op.type === 'fail' && op.stale) s.staleRejected++;
    if (op.f === 'write' && op.type === 'ok') s.writesAcknowledged++;
  }
  for (const t of terms) s.termsByProcess[t.process] = (s.termsByProcess[t.process] ?? 0) + 1;
  return s;
}

/**
 * Checks a history of leases and fenced writes (see {@link History}) against the rules a fenced
 * lock must keep, Jepsen-style: it reads what every process logged, never asks the store.
 *
 * - `fence-order`: each register's log of accepted writes never goes down in fence (a register
 *   without a log: no write acknowledged after another with a higher fence, by real time);
 * - `stale-write`: a write invoked after its holder's term had ended (by the holder's own log) is
 *   acknowledged only while its fence is still the highest acknowledged to that register;
 * - `overlap`: never two holders inside live terms at once, unless one of them was paused then
 *   and none of its writes was acknowledged from the overlap on;
 * - `fence-reuse`: no fence is granted twice;
 * - `failover`: after a holder's crash another process is granted the term within
 *   `failoverBoundMs`;
 * - `leak`: nothing is left at the store (`history.leftovers`);
 * - `lost-write`: every acknowledged write is in its register's log, no refused one is, and the
 *   log holds nothing that was never written.
 *
 * A sharded history (entries with a `shard`, as `HistoryRecorder.forShard` writes them) is
 * checked shard by shard: each shard's entries, with every fault and with the registers its
 * writes went to, must keep every rule on their own (never two live holders of a shard, fences
 * rising per shard, every stale write refused); the violations and stats say which shard.
 */
export function checkHistory(history: History, options?: CheckOptions): CheckResult {
  const h = requireObject('history', history);
  if (!Array.isArray(h.ops)) throw new ConfigError('history.ops', 'must be an array of history entries');
  const o = requireOptions('options', options, { failoverBoundMs: true });
  const bound = o.failoverBoundMs === undefined ? undefined : requireNumber('failoverBoundMs', o.failoverBoundMs, { min: 0 });
  const sorted = [...h.ops].sort(byTime);
  const logs = h.registers ?? {};
  // A sharded history (a ShardManager's): every rule holds per shard, faults count for all.
  const parts = shardParts(sorted, logs);
  if (!parts) return checkOne(sorted, logs, h.leftovers ?? [], bound).result;
  return mergeShards(sorted, parts.map((p) => ({ shard: p.shard, ...checkOne(p.ops, p.registers, [], bound) })), h.leftovers ?? []);
}

/** @internal One election's history (sorted): the rules, with the faults that were at work during some term and those that ended one. */
export function checkOne(sorted: readonly HistoryOp[], logs: Record<string, RegisterEntry[]>, leftovers: readonly string[], bound: number | undefined): OneCheck {
  const terms = reconstructTerms(sorted);
  const writes = writesOf(sorted);
  const violations: Violation[] = [];
  const s = stats(sorted, terms);
  const acked = ackIndex(writes);

  // fence-order
  for (const [register, log] of Object.entries(logs)) {
    let max = -1n;
    let maxId = '';
    for (const e of log) {
      if (e.fence < max) violations.push({ rule: 'fence-order', message: `register ${register} accepted ${e.id} with fence ${e.fence} after ${maxId} with fence ${max}` });
      if (e.fence > max) [max, maxId] = [e.fence, e.id];
    }
  }
  for (const w of writes) {
    if (w.end?.type !== 'ok' || logs[w.register]) continue;
    const before = highestAckedBefore(acked, w.register, w.invoke);
    if (before && before.fence > w.fence) {
      violations.push({ rule: 'fence-order', t: w.end.t, message: `register ${w.register} acknowledged ${w.id} with fence ${w.fence}, invoked after ${before.id} with fence ${before.fence} was acknowledged` });
    }
  }

  // stale-write
  const termOf = new Map<string, HistoryTerm>();
  for (const t of terms) termOf.set(`${t.process}|${t.fence}`, t);
  for (const w of writes) {
    if (w.end?.type !== 'ok') continue;
    const term = termOf.get(`${w.process}|${w.fence}`);
    if (!term) {
      violations.push({ rule: 'stale-write', t: w.end.t, message: `${w.process} wrote ${w.id} with fence ${w.fence}, which it was never granted` });
      continue;
    }
    if (w.invoke <= term.end) continue;
    const before = highestAckedBefore(acked, w.register, w.invoke);
    if (before && before.fence > w.fence) {
      violations.push({
        rule: 'stale-write',
        t: w.end.t,
        message: `${w.process} wrote ${w.id} (fence ${w.fence}) ${ms(w.invoke - term.end).toFixed(1)} ms after its term ended (${term.endedBy}), and it was acknowledged although ${before.id} with fence ${before.fence} had been`,
      });
    }
  }

  // overlap
  const paused = pauses(sorted);
  const excused = (a: HistoryTerm, from: bigint, to: bigint): boolean =>
    (paused.get(a.process) ?? []).some((p) => p.from < to && p.to > from) &&
    !writes.some((w) => w.process === a.process && w.fence === a.fence && w.end?.type === 'ok' && w.end.t > from);
  for (let i = 0; i < terms.length; i++) {
    const a = terms[i]!;
    for (let j = i + 1; j < terms.length && terms[j]!.start < a.end; j++) {
      const b = terms[j]!;
      if (b.end <= a.start || (b.process === a.process && b.fence === a.fence)) continue;
      const from = b.start;
      const to = a.end < b.end ? a.end : b.end;
      if (excused(a, from, to) || excused(b, from, to)) {
        s.excusedOverlaps++;
        continue;
      }
      violations.push({
        rule: 'overlap',
        t: from,
        message: `${b.process} (fence ${b.fence}, its term ended: ${b.endedBy}) was granted while ${a.process}'s term (fence ${a.fence}, ended: ${a.endedBy}) was live: they overlapped ${ms(to - from).toFixed(1)} ms`,
      });
    }
  }

  // fence-reuse
  const granted = new Map<bigint, string>();
  for (const t of terms) {
    const prev = granted.get(t.fence);
    if (prev !== undefined) violations.push({ rule: 'fence-reuse', t: t.start, message: `fence ${t.fence} was granted to ${prev} and again to ${t.process}` });
    else granted.set(t.fence, t.process);
  }

  // failover (and the failover distribution: every lost term, every release)
  const historyEnd = sorted.at(-1)?.t ?? 0n;
  // A fault done to the store itself (no target) may end the term of whoever held it, and the
  // same process may win the next one: there any next grant counts.
  const nextGrant = (after: bigint, other: string | undefined): HistoryTerm | undefined => terms.find((t) => t.start > after && t.process !== other);
  // Each fault from its start to its end (an unhealed one to the end of the history).
  const faults: { op: HistoryOp; until: bigint }[] = [];
  for (const op of sorted) {
    if (op.f !== 'fault' || op.fault === undefined) continue;
    if (op.phase !== 'end') faults.push({ op, until: historyEnd });
    else {
      const open = faults.find((x) => x.until === historyEnd && x.op.fault === op.fault && x.op.target === op.target && x.op.t <= op.t);
      if (open) open.until = op.t;
    }
  }
  /** From `at` (the cause, or the grant when the cause began before it) to the first grant after `after`. */
  const failovers: { cause: string; from: string; at: bigint; after: bigint; anyone: boolean }[] = [];
  // Faults at work during some term, and those that ended one: the rest were ridden out.
  const touched = new Set<HistoryOp>();
  const causes = new Set<HistoryOp>();
  for (const term of terms) {
    // The faults at work during the term: begun before its end, not healed before its start.
    const hits = faults.filter((f) => (f.op.target === undefined || f.op.target === term.process) && f.op.t <= term.end && f.until >= term.start).map((f) => f.op);
    const lost = term.endedBy !== 'released' && term.endedBy !== 'open';
    // The last fault before a lost term's end is what ended it; the holder rode out the others.
    const cause = lost ? hits.at(-1) : undefined;
    for (const f of hits) touched.add(f);
    if (cause) causes.add(cause);
    const at = cause && cause.t > term.start ? cause.t : term.start;
    if (cause) failovers.push({ cause: cause.fault!, from: term.process, at, after: term.start, anyone: cause.target === undefined });
    else if (lost) failovers.push({ cause: 'unprovoked', from: term.process, at: term.end, after: term.start, anyone: false });
  }
  for (const f of touched) if (!causes.has(f)) s.survived[f.fault!] = (s.survived[f.fault!] ?? 0) + 1;
  for (const op of sorted) if (op.f === 'release' && op.type === 'invoke') failovers.push({ cause: 'release', from: op.process, at: op.t, after: op.t, anyone: false });
  for (const f of failovers) {
    const next = nextGrant(f.after > f.at ? f.after : f.at, f.anyone ? undefined : f.from);
    const took = next ? ms(next.start - f.at) : undefined;
    if (next && took !== undefined) s.failovers.push({ cause: f.cause, from: f.from, to: next.process, ms: took } satisfies Failover);
    if (f.cause !== 'kill' || bound === undefined) continue;
    if (took === undefined ? ms(historyEnd - f.at) > bound : took > bound) {
      violations.push({ rule: 'failover', t: f.at, message: `after ${f.from} crashed, ${took === undefined ? 'nobody' : `${next!.process} only after ${took.toFixed(0)} ms`} was granted the term (bound ${bound} ms)` });
    }
  }

  // leak
  for (const l of leftovers) violations.push({ rule: 'leak', message: `left at the store: ${l}` });

  // lost-write
  for (const [register, log] of Object.entries(logs)) {
    const inLog = new Set(log.map((e) => e.id));
    const mine = writes.filter((w) => w.register === register);
    const invoked = new Set(mine.map((w) => w.id));
    for (const w of mine) {
      if (w.end?.type === 'ok' && !inLog.has(w.id)) violations.push({ rule: 'lost-write', t: w.end.t, message: `${w.id} (fence ${w.fence}) was acknowledged but is not in register ${register}` });
      if (w.end?.type === 'fail' && inLog.has(w.id)) violations.push({ rule: 'lost-write', t: w.end.t, message: `${w.id} (fence ${w.fence}) was refused but is in register ${register}` });
    }
    for (const e of log) if (!invoked.has(e.id)) violations.push({ rule: 'lost-write', message: `register ${register} holds ${e.id}, which nobody wrote` });
  }

  return { result: { valid: violations.length === 0, violations, stats: s, terms }, touched, causes };
}
