import type { CheckResult, HistoryOp, RegisterEntry, Violation } from './types.js';

/** @internal What one shard's (or one election's) check found, with the faults it saw at work and those that ended a term. */
export interface OneCheck {
  result: CheckResult;
  touched: Set<HistoryOp>;
  causes: Set<HistoryOp>;
}

/** One shard's part of a sharded history. */
export interface ShardPart {
  shard: string;
  ops: HistoryOp[];
  registers: Record<string, RegisterEntry[]>;
}

/**
 * @internal Splits a sorted history by shard, or undefined when no entry has one. Each part gets
 * its shard's entries and every fault (in order), and the register logs its writes went to. What
 * belongs to no shard (other entries, registers no shard wrote to) is a part of its own, `''`.
 */
export function shardParts(sorted: readonly HistoryOp[], registers: Record<string, RegisterEntry[]>): ShardPart[] | undefined {
  if (!sorted.some((op) => op.shard !== undefined)) return undefined;
  const parts = new Map<string, ShardPart>();
  const part = (shard: string): ShardPart => {
    let p = parts.get(shard);
    if (!p) parts.set(shard, (p = { shard, ops: [], registers: {} }));
    return p;
  };
  const faults: HistoryOp[] = [];
  const registerOf = new Map<string, string>();
  for (const op of sorted) {
    if (op.f === 'fault') faults.push(op);
    else part(op.shard ?? '').ops.push(op);
    if (op.f === 'write' && op.register !== undefined && !registerOf.has(op.register)) registerOf.set(op.register, op.shard ?? '');
  }
  for (const [name, log] of Object.entries(registers)) part(registerOf.get(name) ?? '').registers[name] = log;
  const none = parts.get('');
  if (none && none.ops.length === 0 && Object.keys(none.registers).length === 0) parts.delete('');
  // Every part sees every fault, in time order (both lists are sorted: merge them).
  for (const p of parts.values()) p.ops = mergeSorted(p.ops, faults);
  return [...parts.values()];
}

function mergeSorted(a: HistoryOp[], b: HistoryOp[]): HistoryOp[] {
  const out: HistoryOp[] = [];
  let i = 0;
  let j = 0;
  while (i < a.length || j < b.length) {
    if (j >= b.length || (i < a.length && a[i]!.t <= b[j]!.t)) out.push(a[i++]!);
    else out.push(b[j++]!);
  }
  return out;
}

/** @internal One result for a sharded history: each shard's violations, terms and failovers (tagged with the shard), stats summed, faults counted once. */
export function mergeShards(sorted: readonly HistoryOp[], parts: (OneCheck & { shard: string })[], leftovers: readonly string[]): CheckResult {
  const violations: Violation[] = [];
  const result: CheckResult = {
    valid: true,
    violations,
    terms: [],
    stats: { operations: {}, staleRejected: 0, writesAcknowledged: 0, terms: 0, termsByProcess: {}, faults: {}, failovers: [], survived: {}, excusedOverlaps: 0 },
  };
  const s = result.stats;
  const touched = new Set<HistoryOp>();
  const causes = new Set<HistoryOp>();
  for (const p of parts) {
    const tag = p.shard === '' ? {} : { shard: p.shard };
    const r = p.result;
    for (const v of r.violations) violations.push({ ...v, ...tag, message: p.shard === '' ? v.message : `shard ${p.shard}: ${v.message}` });
    for (const t of r.terms) result.terms.push({ ...t, ...tag });
    for (const [f, o] of Object.entries(r.stats.operations)) {
      const sum = (s.operations[f] ??= { invoked: 0, ok: 0, fail: 0, info: 0 });
      sum.invoked += o.invoked;
      sum.ok += o.ok;
      sum.fail += o.fail;
      sum.info += o.info;
    }
    s.staleRejected += r.stats.staleRejected;
    s.writesAcknowledged += r.stats.writesAcknowledged;
    s.terms += r.stats.terms;
    s.excusedOverlaps += r.stats.excusedOverlaps;
    for (const [proc, n] of Object.entries(r.stats.termsByProcess)) s.termsByProcess[proc] = (s.termsByProcess[proc] ?? 0) + n;
    for (const f of r.stats.failovers) s.failovers.push({ ...f, ...tag });
    for (const f of p.touched) touched.add(f);
    for (const f of p.causes) causes.add(f);
  }
  for (const op of sorted) if (op.f === 'fault' && op.phase !== 'end' && op.fault) s.faults[op.fault] = (s.faults[op.fault] ?? 0) + 1;
  // A fault the holders of every shard it touched rode out; one that ended a term anywhere did not.
  for (const f of touched) if (!causes.has(f)) s.survived[f.fault!] = (s.survived[f.fault!] ?? 0) + 1;
  for (const l of leftovers) violations.push({ rule: 'leak', message: `left at the store: ${l}` });
  violations.sort((a, b) => (a.t === undefined ? (b.t === undefined ? 0 : 1) : b.t === undefined ? -1 : a.t < b.t ? -1 : a.t > b.t ? 1 : 0));
  result.terms.sort((a, b) => (a.start < b.start ? -1 : a.start > b.start ? 1 : 0));
  result.valid = violations.length === 0;
  return result;
}
