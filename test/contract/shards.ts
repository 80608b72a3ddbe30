import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ClosedError, ShardManager, shardOwner, StateError, type Member, type ShardReleaseInfo, type TermContext } from '../../src/index.js';
import { spawnWorker } from '../../src/testing/index.js';
import { openStore, type StoreKit } from '../helpers/stores.js';
import { fieldOf } from '../helpers/config.js';
import { pollValue } from '../helpers/wait.js';
import { LEAVE_BOUND_MS, type MembershipBackend } from './membership.js';

/**
 * The ShardManager's contract, run unchanged over etcd, ZooKeeper, Redis and Postgres (it knows
 * only Membership and Candidate): shards spread by weight, each held once with its own term; a
 * join moves ≈ 1/M and only to the newcomer, a leave only the leaver's; a shard moves only after
 * its old owner drained it and released its lease; a SIGKILLed member's shards are held again
 * within TTL + 1 s; options strict, events typed.
 */
const WAIT = 30_000;
const SHARDS = 24;
const fixture = join(import.meta.dirname, 'fixtures', 'shard-member.ts');
let seq = 0;

/** Every shard term of every member in one test: when it began, when its signal aborted, when its drained work ended. */
interface TermLog {
  member: string;
  shard: number;
  fence: bigint;
  began: number;
  aborted?: number;
  drained?: number;
  released?: ShardReleaseInfo;
}

export function shardsContract(kind: string, backend: () => MembershipBackend): void {
  describe(`ShardManager contract: ${kind}`, () => {
    const group = (): string => `shards-${process.pid}-${++seq}`;
    const timing = (b: MembershipBackend) => ({ ...b.timing, poolSize: SHARDS + 8 });

    /** A member on a kit of its own (its own session), logging every shard term; its work outlives the signal by `lingerMs`. */
    const member = (k: StoreKit, g: string, id: string, log: TermLog[], weight = 1, lingerMs = 0): ShardManager => {
      const sm = new ShardManager(k.membership(g, { id, weight }), (shard) => k.candidate(`${g}-shards/${shard}`, id), { shards: SHARDS, drainTimeoutMs: 5000, backoff: { initialMs: 20, maxMs: 200 } });
      sm.on('error', () => undefined);
      sm.onShardAcquired((shard: number, ctx: TermContext) => {
        const t: TermLog = { member: id, shard, fence: ctx.fence, began: performance.now() };
        log.push(t);
        ctx.signal.addEventListener('abort', () => (t.aborted = performance.now()), { once: true });
        // Work of the term that is still finishing after the signal aborted: the drain waits for it.
        void ctx.track(async () => {
          await new Promise<void>((r) => ctx.signal.addEventListener('abort', () => r(), { once: true }));
          await new Promise((r) => setTimeout(r, lingerMs));
          t.drained = performance.now();
        });
      });
      sm.onShardReleased((shard, info) => {
        const t = log.findLast((x) => x.member === id && x.shard === shard && x.fence === info.fence);
        if (t) t.released = info;
      });
      return sm;
    };

    /** Per shard: terms never overlap (each begins after the one before's signal aborted and its work drained), fences rise. */
    const checkLog = (log: TermLog[]): void => {
      for (let s = 0; s < SHARDS; s++) {
        const terms = log.filter((t) => t.shard === s).sort((a, b) => a.began - b.began);
        for (let i = 1; i < terms.length; i++) {
          const [prev, next] = [terms[i - 1]!, terms[i]!];
          expect(next.fence, `shard ${s}: fences rise`).toBeGreaterThan(prev.fence);
          expect(prev.aborted, `shard ${s}: ${prev.member}'s term ended before ${next.member}'s began`).toBeLessThan(next.began);
          if (prev.member !== next.member) expect(prev.drained, `shard ${s}: ${prev.member}'s work drained before ${next.member}'s term`).toBeLessThan(next.began);
        }
      }
    };

    const owners = (members: readonly Member[]): string[] => Array.from({ length: SHARDS }, (_, s) => shardOwner(s, members)!.id);
    const heldBy = (sms: ShardManager[]): string[] => {
      const out: string[] = Array.from({ length: SHARDS }, () => '');
      for (const sm of sms) for (const s of sm.held()) out[s] = out[s] ? `${out[s]}+${sm.membership.id}` : sm.membership.id;
      return out;
    };
    const settle = (sms: ShardManager[]): Promise<unknown> => Promise.all(sms.map((sm) => sm.whenSettled({ timeoutMs: WAIT })));

    it('spreads the shards by weight, each held once with its own fence; a join moves ≈ 1/M, only to the newcomer, each after its old owner drained it; a leave moves only its shards back', { timeout: 120_000 }, async () => {
      const b = backend();
      const [ka, kb, kc] = (await Promise.all([0, 1, 2].map(() => openStore(b.spec(), timing(b))))) as [StoreKit, StoreKit, StoreKit];
      const g = group();
      const log: TermLog[] = [];
      const a = member(ka, g, 'a', log, 1, 150);
      const bb = member(kb, g, 'b', log, 2, 150);
      try {
        a.start();
        bb.start();
        await pollValue(async () => (a.members?.length === 2 && bb.members?.length === 2 ? true : undefined), WAIT);
        await settle([a, bb]);
        const two = [{ id: 'a', weight: 1 }, { id: 'b', weight: 2 }];
        expect(heldBy([a, bb])).toEqual(owners(two));
        expect(bb.held().length).toBeGreaterThan(a.held().length); // weight 2 against 1
        const fences = new Set(log.map((t) => t.fence));
        expect(fences.size).toBe(log.length); // a fence per term
        // A third member joins: only shards it owns now move, each from its old owner.
        const before = heldBy([a, bb]);
        const c = member(kc, g, 'c', log, 1, 150);
        c.start();
        await pollValue(async () => (a.members?.length === 3 && bb.members?.length === 3 && c.members?.length === 3 ? true : undefined), WAIT);
        await settle([a, bb, c]);
        const three = [...two, { id: 'c', weight: 1 }];
        const after = heldBy([a, bb, c]);
        expect(after).toEqual(owners(three));
        const moved = after.filter((o, s) => o !== before[s]);
        expect(moved.every((o) => o === 'c')).toBe(true);
        expect(moved.length).toBe(c.held().length);
        expect(moved.length).toBeGreaterThan(0);
        expect(moved.length).toBeLessThan(SHARDS / 2); // ≈ 1/4 by weight
        console.log(`[shards ${kind}] ${SHARDS} shards over a(1) b(2): ${a.held().length}/${bb.held().length}; c(1) joined, ${moved.length} moved to it`);
        for (const t of log.filter((x) => x.released?.moved)) expect(t.released!.reason).toBe('closed');
        // c leaves: its shards go back where they were, nothing else moves.
        await c.close();
        await pollValue(async () => (a.members?.length === 2 && bb.members?.length === 2 ? true : undefined), WAIT);
        await settle([a, bb]);
        expect(heldBy([a, bb])).toEqual(before);
        checkLog(log);
        expect(log.filter((t) => t.member === 'c').every((t) => t.released && !t.released.moved && t.released.reason === 'closed')).toBe(true);
      } finally {
        await Promise.all([a.close(), bb.close()]);
        await Promise.all([ka.close(), kb.close(), kc.close()]);
      }
      // Closed: every term released, none held.
      expect(log.every((t) => t.released !== undefined)).toBe(true);
      expect(a.held()).toEqual([]);
    });

    it("a SIGKILLed member's shards are held again by the others within TTL + 1 s", { timeout: 120_000 }, async () => {
      const b = backend();
      const k = await openStore(b.spec(), timing(b));
      const g = group();
      const log: TermLog[] = [];
      const a = member(k, g, 'a', log);
      const w = await spawnWorker(fixture, [], { env: { SHARD_MEMBER: JSON.stringify({ spec: b.spec(), ttlMs: b.timing.ttlMs, group: g, id: 'doomed', shards: SHARDS }) } });
      try {
        a.start();
        await pollValue(async () => (a.members?.length === 2 ? true : undefined), WAIT);
        await a.whenSettled({ timeoutMs: WAIT });
        const theirs = (await w.waitFor<{ held: number[] }>('settled', { timeoutMs: WAIT })).data.held;
        expect(theirs.length + a.held().length).toBe(SHARDS);
        expect(theirs.length).toBeGreaterThan(0);
        const t0 = performance.now();
        await w.kill();
        await pollValue(async () => (a.held().length === SHARDS ? true : undefined), b.timing.ttlMs + LEAVE_BOUND_MS, 10);
        const took = performance.now() - t0;
        console.log(`[shards ${kind}] SIGKILLed member's ${theirs.length} shards held again after ${Math.round(took)} ms (TTL ${b.timing.ttlMs} ms)`);
        checkLog(log);
      } finally {
        await w.kill();
        await a.close();
        await k.close();
      }
    });

    it('refuses bad options and misuse with typed errors', async () => {
      const b = backend();
      const k = await openStore(b.spec(), timing(b));
      const m = k.membership(group(), { id: 'x' });
      const make = (o: unknown, mm: unknown = m, f: unknown = () => k.candidate('x', 'x')) => () => new ShardManager(mm as never, f as never, o as never);
      expect(fieldOf(make(undefined))).toBe('shards');
      for (const shards of [0, -1, 1.5, '8', Number.NaN, 2 ** 21]) expect(fieldOf(make({ shards }))).toBe('shards');
      expect(fieldOf(make({ shards: 8, shard: 8 }))).toBe('shard');
      expect(fieldOf(make({ shards: 8, drainTimeout: 5 }))).toBe('drainTimeout');
      expect(fieldOf(make({ shards: 8, drainTimeoutMs: -1 }))).toBe('drainTimeoutMs');
      expect(fieldOf(make({ shards: 8, backoff: { min: 1 } }))).toBe('backoff.min');
      expect(fieldOf(make({ shards: 8 }, {}))).toBe('membership');
      expect(fieldOf(make({ shards: 8 }, m, 'etcd'))).toBe('candidate');
      const sm = new ShardManager(m, () => k.candidate('x', 'x'), { shards: 8 });
      expect(fieldOf(() => sm.onShardAcquired(1 as never))).toBe('hook');
      await expect(sm.whenSettled({ timeoutMs: 'soon' } as never)).rejects.toMatchObject({ field: 'timeoutMs' });
      sm.start();
      expect(() => sm.start()).toThrow(StateError);
      await sm.close();
      await sm.close(); // idempotent
      expect(() => sm.start()).toThrow(ClosedError);
      await expect(sm.whenSettled()).rejects.toBeInstanceOf(ClosedError);
      expect(m.joined).toBe(false); // close() left
      await k.close();
    });
  });
}
