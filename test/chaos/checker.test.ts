import { describe, expect, it } from 'vitest';
import { ConfigError, LeadershipManager, StaleFenceError, type Lease } from '../../src/index.js';
import { LeaseController } from '../../src/core/lease.js';
import { LeaseCandidate } from '../../src/core/lease-candidate.js';
import { checkHistory, historyFromJSON, historyToJSON, HistoryRecorder, type History, type HistoryOp, type CheckRule } from '../../src/testing/index.js';
import { reconstructTerms } from '../../src/testing/history/terms.js';
import { pollValue } from '../helpers/wait.js';

/** A history entry at `ms` milliseconds on a made-up monotonic timeline. */
const ns = (ms: number): bigint => BigInt(Math.round(ms * 1e6));
function op(ms: number, process: string, type: HistoryOp['type'], f: HistoryOp['f'], extra: Partial<HistoryOp> = {}): HistoryOp {
  return { t: ns(ms), process, type, f, ...extra };
}
const grant = (ms: number, p: string, fence: bigint): HistoryOp[] => [op(ms - 1, p, 'invoke', 'acquire'), op(ms, p, 'ok', 'acquire', { fence })];
const write = (ms: number, p: string, fence: bigint, id: string, end: 'ok' | 'fail' | 'info' = 'ok', register = 'r'): HistoryOp[] => [
  op(ms, p, 'invoke', 'write', { fence, id, register }),
  op(ms + 1, p, end, 'write', { fence, id, register, ...(end === 'fail' ? { stale: true } : {}) }),
];
const ended = (ms: number, p: string, fence: bigint, reason = 'released'): HistoryOp => op(ms, p, 'info', 'term-end', { fence, error: reason });
const fault = (ms: number, kind: string, phase: 'start' | 'end', target?: string): HistoryOp => op(ms, 'nemesis', 'info', 'fault', { fault: kind, phase, ...(target ? { target } : {}) });
const rules = (h: History, bound?: number): CheckRule[] => [...new Set(checkHistory(h, bound === undefined ? {} : { failoverBoundMs: bound }).violations.map((v) => v.rule))].sort();

/** A holds fence 1 and writes, resigns; B holds fence 2 and writes, resigns. Nothing wrong. */
const clean = (): History => ({
  ops: [...grant(0, 'A', 1n), ...write(10, 'A', 1n, 'a1'), ended(20, 'A', 1n), ...grant(30, 'B', 2n), ...write(40, 'B', 2n, 'b1'), ended(50, 'B', 2n)],
  registers: { r: [{ id: 'a1', fence: 1n }, { id: 'b1', fence: 2n }] },
});

describe('the history checker', () => {
  it('finds nothing wrong in a clean hand-off and counts what happened', () => {
    const r = checkHistory(clean());
    expect(r.violations).toEqual([]);
    expect(r.valid).toBe(true);
    expect(r.terms.map((t) => [t.process, t.fence, t.endedBy])).toEqual([['A', 1n, 'released'], ['B', 2n, 'released']]);
    expect(r.stats.operations.write).toEqual({ invoked: 2, ok: 2, fail: 0, info: 0 });
    expect(r.stats.termsByProcess).toEqual({ A: 1, B: 1 });
  });

  it('fence-order: a register that accepted a lower fence after a higher one', () => {
    const h = clean();
    h.registers = { r: [{ id: 'b1', fence: 2n }, { id: 'a1', fence: 1n }] };
    expect(rules(h)).toEqual(['fence-order']);
  });

  it('fence-order without a register log: a write acknowledged after a higher fence was, by real time', () => {
    // B's write with fence 2 was acknowledged before A's with fence 1 was even sent.
    const h: History = { ops: [...grant(0, 'B', 2n), ...write(5, 'B', 2n, 'b1'), ended(8, 'B', 2n), ...grant(10, 'A', 1n), ...write(20, 'A', 1n, 'a1'), ended(30, 'A', 1n)] };
    expect(rules(h)).toEqual(['fence-order']);
  });

  it("stale-write: a paused holder's write after its deadline is acknowledged though its successor's higher fence was", () => {
    const ops = [
      ...grant(0, 'A', 1n),
      op(1, 'A', 'info', 'deadline', { fence: 1n, deadline: ns(15) }),
      fault(12, 'pause', 'start', 'A'),
      ...grant(30, 'B', 2n),
      ...write(40, 'B', 2n, 'b1'),
      fault(60, 'pause', 'end', 'A'),
      ...write(61, 'A', 1n, 'a-late'),
      ended(62, 'A', 1n, 'deadline'),
    ];
    expect(rules({ ops, registers: { r: [{ id: 'b1', fence: 2n }, { id: 'a-late', fence: 1n }] } })).toEqual(['fence-order', 'stale-write']);
    const terms = reconstructTerms(ops);
    expect(terms[0]).toMatchObject({ process: 'A', end: ns(15), endedBy: 'deadline' });
    // The same write refused: fencing did its job, the checker counts it.
    const refused = ops.map((o) => (o.id === 'a-late' && o.type === 'ok' ? { ...o, type: 'fail' as const, stale: true } : o));
    const r = checkHistory({ ops: refused, registers: { r: [{ id: 'b1', fence: 2n }] } });
    expect(r.violations).toEqual([]);
    expect(r.stats.staleRejected).toBe(1);
  });

  it('a late write accepted before any higher fence was is no violation (nobody had written since)', () => {
    const ops = [...grant(0, 'A', 1n), op(1, 'A', 'info', 'deadline', { fence: 1n, deadline: ns(15) }), ...write(20, 'A', 1n, 'a-late'), ended(22, 'A', 1n, 'deadline'), ...grant(30, 'B', 2n), ...write(40, 'B', 2n, 'b1')];
    expect(rules({ ops, registers: { r: [{ id: 'a-late', fence: 1n }, { id: 'b1', fence: 2n }] } })).toEqual([]);
  });

  it('overlap: a second holder granted while the first one was still inside its term', () => {
    const ops = [...grant(0, 'A', 1n), ...grant(30, 'B', 2n), ended(50, 'A', 1n), ended(60, 'B', 2n)];
    expect(rules({ ops })).toEqual(['overlap']);
  });

  it('overlap is excused when the first holder was paused and none of its writes was accepted from then on', () => {
    const base = [...grant(0, 'A', 1n), fault(10, 'pause', 'start', 'A'), ...grant(30, 'B', 2n), ...write(35, 'B', 2n, 'b1'), fault(55, 'pause', 'end', 'A'), ended(60, 'B', 2n)];
    const refused = checkHistory({ ops: [...base, ...write(56, 'A', 1n, 'a-late', 'fail'), ended(58, 'A', 1n, 'expired')] });
    expect(refused.violations).toEqual([]);
    expect(refused.stats.excusedOverlaps).toBe(1);
    expect(rules({ ops: [...base, ...write(56, 'A', 1n, 'a-late', 'ok'), ended(58, 'A', 1n, 'expired')] })).toContain('overlap');
  });

  it('fence-reuse: one fence granted to two holders', () => {
    expect(rules({ ops: [...grant(0, 'A', 7n), ended(10, 'A', 7n), ...grant(20, 'B', 7n), ended(30, 'B', 7n)] })).toEqual(['fence-reuse']);
  });

  it("failover: after the holder's crash nobody is granted the term within the bound", () => {
    const crash = [...grant(0, 'A', 1n), fault(100, 'kill', 'start', 'A'), fault(101, 'kill', 'end', 'A')];
    expect(rules({ ops: [...crash, ...grant(3100, 'B', 2n)] }, 2000)).toEqual(['failover']);
    expect(rules({ ops: [...crash, op(5000, 'B', 'invoke', 'acquire')] }, 2000)).toEqual(['failover']);
    const ok = checkHistory({ ops: [...crash, ...grant(1600, 'B', 2n)] }, { failoverBoundMs: 2000 });
    expect(ok.violations).toEqual([]);
    expect(ok.stats.failovers).toEqual([{ cause: 'kill', from: 'A', to: 'B', ms: 1500 }]);
    expect(ok.terms[0]).toMatchObject({ end: ns(100), endedBy: 'crash' });
  });

  it('a store fault that ends the term counts toward the failover distribution, the same process winning again too', () => {
    const ops = [...grant(0, 'A', 1n), fault(100, 'cluster-restart', 'start'), ended(150, 'A', 1n, 'suspended'), fault(600, 'cluster-restart', 'end'), ...grant(900, 'A', 2n)];
    const r = checkHistory({ ops }, { failoverBoundMs: 2000 });
    expect(r.violations).toEqual([]);
    expect(r.stats.failovers).toEqual([{ cause: 'cluster-restart', from: 'A', to: 'A', ms: 800 }]);
    // A term that outlives the fault (resigned later) is counted as kept.
    const kept = checkHistory({ ops: [...grant(0, 'A', 1n), fault(100, 'member-kill', 'start'), ended(500, 'A', 1n, 'released')] });
    expect(kept.stats.survived).toEqual({ 'member-kill': 1 });
    // A fault still at work when the term began counts for it too (granted during a restart).
    const during = checkHistory({ ops: [fault(0, 'store-restart', 'start'), ...grant(10, 'A', 1n), ended(20, 'A', 1n, 'connection-lost'), fault(500, 'store-restart', 'end'), ...grant(600, 'B', 2n)] });
    expect(during.stats.failovers).toEqual([{ cause: 'store-restart', from: 'A', to: 'B', ms: 590 }]);
    // Of two faults in one lost term, the last one ended it; a term lost with none is unprovoked.
    const two = checkHistory({ ops: [...grant(0, 'A', 1n), fault(100, 'clock-jump', 'start', 'A'), fault(100, 'clock-jump', 'end', 'A'), fault(200, 'cut', 'start', 'A'), fault(200, 'cut', 'end', 'A'), ended(210, 'A', 1n, 'suspended'), ...grant(300, 'B', 2n), ended(400, 'B', 2n, 'deadline'), ...grant(700, 'A', 3n)] });
    expect(two.stats.survived).toEqual({ 'clock-jump': 1 });
    expect(two.stats.failovers).toEqual([
      { cause: 'cut', from: 'A', to: 'B', ms: 100 },
      { cause: 'unprovoked', from: 'B', to: 'A', ms: 300 },
    ]);
  });

  it('leak: the store still holds something once everyone left', () => {
    expect(rules({ ...clean(), leftovers: ['key chaos/leader/694d9a'] })).toEqual(['leak']);
  });

  it('lost-write: an acknowledged write missing from the register, a refused one in it, one nobody wrote', () => {
    const missing = clean();
    missing.registers = { r: [{ id: 'a1', fence: 1n }] };
    expect(rules(missing)).toEqual(['lost-write']);
    const h: History = { ops: [...grant(0, 'A', 1n), ...write(10, 'A', 1n, 'a1', 'fail'), ended(20, 'A', 1n)], registers: { r: [{ id: 'a1', fence: 1n }, { id: 'ghost', fence: 1n }] } };
    const r = checkHistory(h);
    expect(r.violations.map((v) => v.rule)).toEqual(['lost-write', 'lost-write']);
    // An unknown outcome (a connection error) may or may not have landed: no violation either way.
    const unknown: History = { ops: [...grant(0, 'A', 1n), ...write(10, 'A', 1n, 'a1', 'info'), ended(20, 'A', 1n)], registers: { r: [] } };
    expect(rules(unknown)).toEqual([]);
  });

  it('refuses what is not a history, naming the field', () => {
    expect(() => checkHistory(null as unknown as History)).toThrow(ConfigError);
    expect(() => checkHistory({} as History)).toThrow(expect.objectContaining({ field: 'history.ops' }));
    expect(() => checkHistory(clean(), { failoverBoundMs: -1 })).toThrow(expect.objectContaining({ field: 'failoverBoundMs' }));
  });

  it('a history survives JSON with its bigints exact', () => {
    const h = clean();
    h.ops.push(op(60, 'A', 'info', 'deadline', { fence: 2n ** 63n - 1n, deadline: ns(99) }));
    expect(historyFromJSON(historyToJSON(h))).toEqual(h);
  });
});

describe('HistoryRecorder', () => {
  it("records a term from grant to its local deadline, and a write refused for its fence as stale", async () => {
    const rec = new HistoryRecorder('p1');
    const ctl = new LeaseController({ name: 'n', fence: 5n, deadline: () => deadline, release: async () => undefined });
    const deadline = performance.now() + 80;
    const lease = await rec.acquire(async () => ctl.lease);
    await expect(rec.write('r', 'w1', lease.fence, () => Promise.reject(new StaleFenceError(5n, 6n, 'r')))).rejects.toThrow(StaleFenceError);
    await pollValue(async () => (rec.ops.some((o) => o.f === 'term-end') ? true : undefined), 5000);
    const kinds = rec.ops.map((o) => `${o.f}:${o.type}`);
    expect(kinds.slice(0, 3)).toEqual(['acquire:invoke', 'acquire:ok', 'deadline:info']);
    expect(rec.ops.find((o) => o.f === 'write' && o.type === 'fail')).toMatchObject({ stale: true, fence: 5n });
    expect(rec.ops.at(-1)).toMatchObject({ f: 'term-end', error: 'deadline', fence: 5n });
    const [term] = checkHistory({ ops: rec.ops }).terms;
    // The term ends at the deadline it reported (within the sampling of one ms), not when the abort was seen.
    const d = rec.ops.find((o) => o.f === 'deadline')!.deadline!;
    expect(term).toMatchObject({ endedBy: 'deadline', end: d });
  });

  it("follows a LeadershipManager's terms: campaigns as acquires, each term ended where the manager's signal aborted", async () => {
    // A candidate on plain leases (no store): term 1 is resigned, term 2 is lost at its local
    // deadline, the third campaign waits until the manager is closed.
    let fence = 0n;
    const candidate = new LeaseCandidate({
      id: 'm1',
      name: 'n',
      what: 'test election',
      acquire: async (signal) => {
        if (fence === 2n) return new Promise<never>((_, reject) => signal.addEventListener('abort', () => reject(signal.reason), { once: true }));
        const deadline = ++fence === 1n ? Infinity : performance.now() + 60;
        return new LeaseController({ name: 'n', fence, deadline: () => deadline, release: async () => undefined }).lease;
      },
      leader: async () => undefined,
      observe: async function* () {},
    });
    const manager = new LeadershipManager(candidate, { backoff: { initialMs: 10, maxMs: 10 }, observeLeader: false });
    const rec = new HistoryRecorder('m1');
    const unfollow = rec.followManager(manager);
    const terms: Lease[] = [];
    manager.onElected(async (ctx) => {
      terms.push(ctx.term);
      if (ctx.fence === 1n) void rec.release(ctx.term, () => manager.resign());
      await rec.write('r', `w${ctx.fence}`, ctx.fence, async () => undefined);
    });
    manager.start();
    await pollValue(async () => (rec.ops.filter((o) => o.f === 'acquire' && o.type === 'invoke').length === 3 ? true : undefined), 5000);
    await manager.close();
    unfollow();
    // (`release` ok comes once the term has drained: before or after the next campaign begins.)
    expect(rec.ops.filter((o) => o.f === 'release').map((o) => o.type)).toEqual(['invoke', 'ok']);
    const seq = rec.ops.filter((o) => o.f !== 'deadline' && o.f !== 'write' && !(o.f === 'release' && o.type === 'ok')).map((o) => `${o.f}:${o.type}${o.fence === undefined ? '' : `:${o.fence}`}${o.f === 'term-end' ? `:${o.error}` : ''}`);
    expect(seq.slice(0, 7)).toEqual(['acquire:invoke', 'acquire:ok:1', 'release:invoke:1', 'term-end:info:1:released', 'acquire:invoke', 'acquire:ok:2', 'term-end:info:2:deadline']);
    expect(seq.at(-1)).toBe('acquire:fail'); // closed while campaigning again (after the backoff)
    const r = checkHistory({ ops: rec.ops, registers: { r: [{ id: 'w1', fence: 1n }, { id: 'w2', fence: 2n }] } });
    expect(r.violations).toEqual([]);
    expect(r.terms.map((t) => [t.fence, t.endedBy])).toEqual([[1n, 'released'], [2n, 'deadline']]);
    expect(r.stats.operations.acquire).toMatchObject({ ok: 2, fail: 1 });
  });
  it('a sharded history is checked shard by shard: terms of different shards may overlap, two live holders of one shard may not', () => {
    const tag = (shard: string, ops: HistoryOp[]): HistoryOp[] => ops.map((o) => ({ ...o, shard }));
    // A holds shard 0 (fence 1) while B holds shard 1 (fence 2), at the same time; then a kill of A.
    const ops = [
      ...tag('0', [...grant(0, 'A', 1n), ...write(10, 'A', 1n, 'a1', 'ok', 'r/0')]),
      ...tag('1', [...grant(5, 'B', 2n), ...write(12, 'B', 2n, 'b1', 'ok', 'r/1'), ended(40, 'B', 2n)]),
      fault(20, 'kill', 'start', 'A'),
      fault(21, 'kill', 'end', 'A'),
      ...tag('0', [...grant(30, 'B', 3n), ...write(35, 'B', 3n, 'b2', 'ok', 'r/0'), ended(50, 'B', 3n)]),
    ];
    const registers = { 'r/0': [{ id: 'a1', fence: 1n }, { id: 'b2', fence: 3n }], 'r/1': [{ id: 'b1', fence: 2n }] };
    const r = checkHistory({ ops, registers }, { failoverBoundMs: 100 });
    expect(r.violations).toEqual([]);
    expect(r.terms.map((t) => [t.shard, t.process, t.fence, t.endedBy])).toEqual([['0', 'A', 1n, 'crash'], ['1', 'B', 2n, 'released'], ['0', 'B', 3n, 'released']]);
    expect(r.stats.faults).toEqual({ kill: 1 }); // once, not once per shard
    expect(r.stats.failovers).toEqual([expect.objectContaining({ cause: 'kill', from: 'A', to: 'B', ms: 10, shard: '0' })]);
    expect(r.stats.writesAcknowledged).toBe(3);
    // The same entries read as one election: two live holders at once (A and B).
    expect(rules({ ops: ops.map(({ shard: _s, ...o }) => o) })).toContain('overlap');
    // One shard held twice, and its register taking a lower fence: found, and named.
    const bad = [...ops, ...tag('1', [...grant(45, 'A2', 4n), ...write(46, 'A2', 4n, 'x1', 'ok', 'r/1'), ...grant(47, 'C', 5n), ...write(48, 'C', 5n, 'c1', 'ok', 'r/1'), ended(60, 'C', 5n)])];
    const r2 = checkHistory({ ops: bad, registers: { ...registers, 'r/1': [{ id: 'b1', fence: 2n }, { id: 'c1', fence: 5n }, { id: 'x1', fence: 4n }] } });
    expect(new Set(r2.violations.map((v) => `${v.shard} ${v.rule}`))).toEqual(new Set(['1 overlap', '1 fence-order']));
    expect(r2.violations.every((v) => v.message.startsWith('shard 1: '))).toBe(true);
  });

  it("follows a ShardManager's shard terms into each shard's recorder", async () => {
    const rec = new HistoryRecorder('p');
    const events = new (await import('eventemitter3')).EventEmitter();
    let assigned: number[] = [];
    const sm = Object.assign(events, { get assigned() { return assigned; } });
    const stop = rec.followShards(sm as never);
    const lease = (fence: bigint) => new LeaseController({ name: 's', fence, release: async () => undefined }).lease;
    assigned = [0, 1];
    sm.emit('assigned', assigned, { added: [0, 1], moved: [], removed: [], members: [] });
    const t0 = lease(1n);
    const ctl = new AbortController();
    sm.emit('shardAcquired', 0, { fence: 1n, signal: ctl.signal, term: t0 }, { waitedMs: 0, from: undefined });
    assigned = [1];
    sm.emit('assigned', assigned, { added: [], moved: [], removed: [0], members: [] });
    ctl.abort();
    sm.emit('shardReleased', 0, { fence: 1n });
    stop();
    const byShard = (s: string) => rec.ops.filter((o) => o.shard === s).map((o) => `${o.type} ${o.f}`);
    expect(byShard('0')).toEqual(['invoke acquire', 'ok acquire', 'invoke release', 'info term-end', 'ok release']);
    expect(byShard('1')).toEqual(['invoke acquire']);
    expect(rec.forShard(0)).toBe(rec.forShard('0'));
    expect(() => new HistoryRecorder('p', { shard: '' })).toThrow(ConfigError);
  });
});
