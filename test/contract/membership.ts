import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { BusyError, ClosedError, type Member, type Membership } from '../../src/index.js';
import { FaultProxy, spawnWorker } from '../../src/testing/index.js';
import { openStore, type KitTiming, type StoreKit, type StoreSpec } from '../helpers/stores.js';
import { fieldOf } from '../helpers/config.js';
import { pollValue } from '../helpers/wait.js';

/**
 * The contract every Membership keeps (src/core/membership.ts), run over etcd, ZooKeeper, Redis
 * and Postgres against real servers: joins and leaves are seen by every observer; a member whose
 * process is SIGKILLed or frozen leaves the set within TTL + 1 s (the liveness of its backend's
 * sessions) and a frozen one joins again by itself once it runs; ids are unique; options are
 * strict; a given-up join leaves nothing behind.
 */
export interface MembershipBackend {
  /** Where the store is (for child processes), and the same through a proxy on `port`. */
  spec(port?: number): StoreSpec;
  /** The store's port on 127.0.0.1 (for a FaultProxy in front of it). */
  port(): number;
  timing: KitTiming;
}

/** How long past the TTL a dead member may still be listed: the store's expiry check plus an observer's re-read. */
export const LEAVE_BOUND_MS = 1000;
const WAIT = 20_000;
const fixture = join(import.meta.dirname, 'fixtures', 'member.ts');
let seq = 0;

/** Follows a membership's observe(): every set it yielded, in order. */
function follow(m: Membership) {
  const ctl = new AbortController();
  const seen: (readonly Member[])[] = [];
  const done = (async () => {
    try {
      for await (const set of m.observe({ signal: ctl.signal })) seen.push(set);
    } catch {
      // ended by stop()
    }
  })();
  const ids = (): string | undefined => seen.at(-1)?.map((x) => x.id).join(',');
  return {
    seen,
    ids,
    /** Resolves once the latest set's ids are `want` (comma-joined), within `ms`. */
    until: (want: string, ms = WAIT) => pollValue(async () => (ids() === want ? true : undefined), ms, 10),
    stop: async () => {
      ctl.abort();
      await done;
    },
  };
}

export function membershipContract(kind: string, backend: () => MembershipBackend): void {
  describe(`Membership contract: ${kind}`, () => {
    const group = (): string => `members-${process.pid}-${++seq}`;
    const kit = (b: MembershipBackend, port?: number): Promise<StoreKit> => openStore(b.spec(port), b.timing);

    it('joins and leaves are seen by every observer, sorted by id, with weights; the first reading is the current set', async () => {
      const b = backend();
      const k = await kit(b);
      const g = group();
      const watcher = follow(k.membership(g, { id: 'observer' }));
      await watcher.until('');
      const x = k.membership(g, { id: 'x', weight: 2 });
      const a = k.membership(g, { id: 'a' });
      expect(x.joined).toBe(false);
      await x.join({ timeoutMs: WAIT });
      expect(x.joined).toBe(true);
      await x.join(); // at once while joined
      await a.join({ timeoutMs: WAIT });
      await watcher.until('a,x');
      expect(watcher.seen.at(-1)).toEqual([{ id: 'a', weight: 1 }, { id: 'x', weight: 2 }]);
      expect(await a.members()).toEqual([{ id: 'a', weight: 1 }, { id: 'x', weight: 2 }]);
      const late = follow(k.membership(g));
      await late.until('a,x');
      expect(late.seen[0]?.map((m) => m.id)).toEqual(['a', 'x']);
      // A leave is seen at once, not a TTL later.
      await x.leave();
      expect(x.joined).toBe(false);
      await Promise.all([watcher.until('a', b.timing.ttlMs / 2), late.until('a', b.timing.ttlMs / 2)]);
      await x.leave(); // idempotent
      await expect(x.join()).rejects.toBeInstanceOf(ClosedError);
      await a.leave();
      await watcher.until('');
      await Promise.all([watcher.stop(), late.stop()]);
      await k.close();
    });

    it("a SIGKILLed member's process leaves the set within TTL + 1 s", { timeout: 60_000 }, async () => {
      const b = backend();
      const k = await kit(b);
      const g = group();
      const watcher = follow(k.membership(g));
      const w = await spawnWorker(fixture, [], { env: { MEMBER: JSON.stringify({ spec: b.spec(), ttlMs: b.timing.ttlMs, group: g, id: 'doomed', weight: 3 }) } });
      try {
        await w.waitFor('joined', { timeoutMs: WAIT });
        await watcher.until('doomed');
        expect(watcher.seen.at(-1)).toEqual([{ id: 'doomed', weight: 3 }]);
        const t0 = performance.now();
        await w.kill();
        await watcher.until('', b.timing.ttlMs + LEAVE_BOUND_MS);
        console.log(`[membership ${kind}] SIGKILLed member left the set after ${Math.round(performance.now() - t0)} ms (TTL ${b.timing.ttlMs} ms)`);
      } finally {
        await w.kill();
        await watcher.stop();
        await k.close();
      }
    });

    it('a frozen (SIGSTOP) member leaves the set within TTL + 1 s and joins again by itself once it runs', { timeout: 60_000 }, async () => {
      const b = backend();
      const k = await kit(b);
      const g = group();
      const watcher = follow(k.membership(g));
      const w = await spawnWorker(fixture, [], { env: { MEMBER: JSON.stringify({ spec: b.spec(), ttlMs: b.timing.ttlMs, group: g, id: 'sleepy' }) } });
      try {
        await w.waitFor('joined', { timeoutMs: WAIT });
        await watcher.until('sleepy');
        const t0 = performance.now();
        w.pause();
        await watcher.until('', b.timing.ttlMs + LEAVE_BOUND_MS);
        console.log(`[membership ${kind}] frozen member left the set after ${Math.round(performance.now() - t0)} ms (TTL ${b.timing.ttlMs} ms)`);
        w.resume();
        await watcher.until('sleepy');
        // Leaving is final and seen at once.
        w.send({ cmd: 'leave' });
        await w.waitFor('left', { timeoutMs: WAIT });
        await watcher.until('', b.timing.ttlMs / 2);
      } finally {
        w.resume();
        await w.kill();
        await watcher.stop();
        await k.close();
      }
    });

    it('a second live member with the same id is refused with BusyError (code BUSY); once the first leaves it joins', async () => {
      const b = backend();
      const [k1, k2] = [await kit(b), await kit(b)];
      const g = group();
      const first = k1.membership(g, { id: 'twin' });
      await first.join({ timeoutMs: WAIT });
      const second = k2.membership(g, { id: 'twin', weight: 5 });
      await expect(second.join({ timeoutMs: WAIT })).rejects.toMatchObject({ code: 'BUSY' });
      // Whatever a refused join wrote is gone by the time it rejects: the set read right after
      // shows only the first (Postgres once read the refused twin there, its backend not yet gone).
      for (let i = 0; i < 10; i++) {
        await expect(second.join({ timeoutMs: WAIT })).rejects.toBeInstanceOf(BusyError);
        expect(await first.members(), `after refusal ${i + 1}`).toEqual([{ id: 'twin', weight: 1 }]);
      }
      expect(second.joined).toBe(false);
      await first.leave();
      await second.join({ timeoutMs: WAIT });
      expect(await first.members()).toEqual([{ id: 'twin', weight: 5 }]);
      await second.leave();
      await Promise.all([k1.close(), k2.close()]);
    });

    it('options are strict and bad ones are ConfigErrors naming the field, before any I/O', async () => {
      const b = backend();
      const k = await kit(b);
      const g = group();
      expect(fieldOf(() => k.membership(g, { id: 'x', wieght: 2 }))).toBe('wieght');
      expect(() => k.membership(g, { id: 'x', wieght: 2 })).toThrow(/did you mean 'weight'/);
      for (const weight of [0, -1, Number.NaN, Infinity, '2', null]) expect(fieldOf(() => k.membership(g, { weight }))).toBe('weight');
      for (const id of ['', 7, 'a\u0000b']) expect(fieldOf(() => k.membership(g, { id }))).toBe('id');
      expect(fieldOf(() => k.membership('', {}))).toMatch(/^(group|path)$/);
      const m = k.membership(g, { id: 'x' });
      await expect(m.join({ timeoutMs: -1 } as never)).rejects.toMatchObject({ field: 'timeoutMs' });
      await expect(m.members({ signal: 'now' } as never)).rejects.toMatchObject({ field: 'signal' });
      expect(fieldOf(() => m.observe({ signl: undefined } as never))).toBe('signl');
      const ac = new AbortController();
      ac.abort(new Error('not now'));
      await expect(m.join({ signal: ac.signal })).rejects.toThrow('not now');
      expect(await m.members()).toEqual([]);
      await m.leave();
      await k.close();
    });

    it('a join given up while the store does not answer rejects with its timeout and leaves nothing behind', { timeout: 60_000 }, async () => {
      const b = backend();
      const k = await kit(b);
      const proxy = await new FaultProxy({ target: { port: b.port() } }).start();
      const through = await kit(b, proxy.port);
      const g = group();
      try {
        const m = through.membership(g, { id: 'cut-off' });
        await through.membership(g).members({ timeoutMs: WAIT }); // connected (and the schema made) before the cut
        proxy.blackhole();
        const t0 = performance.now();
        await expect(m.join({ timeoutMs: 500 })).rejects.toMatchObject({ code: 'ACQUIRE_TIMEOUT' });
        expect(performance.now() - t0).toBeLessThan(500 + 1000);
        expect(m.joined).toBe(false);
        proxy.heal();
        // What was held at the proxy arrives now; then the join's undo must take it out again,
        // long before a TTL (a Redis key left to expire would be listed for its TTL).
        await through.membership(g).members({ timeoutMs: WAIT }).catch(() => undefined);
        const watcher = follow(k.membership(g));
        await watcher.until('', b.timing.ttlMs / 2);
        await new Promise((r) => setTimeout(r, 500));
        expect(await k.membership(g).members()).toEqual([]);
        await watcher.stop();
        await m.leave();
      } finally {
        proxy.heal();
        await through.close().catch(() => undefined);
        await proxy.stop();
        await k.close();
      }
    });
  });
}
