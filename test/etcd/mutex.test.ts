import { describe, expect, it } from 'vitest';
import { EtcdMutex } from '../../src/recipes/etcd/mutex.js';
import { AcquireTimeoutError, ClosedError, ConfigError, LeaseLostError, NotHeldError, SessionExpiredError } from '../../src/core/errors.js';
import { etcdForFile, TTL, serverCalls, uniqueName, until } from './helpers.js';

const { server, pool } = etcdForFile();

async function keysUnder(name: string): Promise<string[]> {
  return pool.shared().getAll().prefix(`${name}/`).keys();
}

describe('EtcdMutex', () => {
  it('hands out strictly increasing fences to successive holders', async () => {
    const name = uniqueName('m');
    const m = new EtcdMutex(await pool.session(), name);
    const fences: bigint[] = [];
    for (let i = 0; i < 5; i++) {
      const lease = await m.acquire();
      fences.push(lease.fence);
      expect(lease.signal.aborted).toBe(false);
      await lease.release();
      expect((lease.signal.reason as LeaseLostError).reason).toBe('released');
    }
    for (let i = 1; i < fences.length; i++) expect(fences[i]!).toBeGreaterThan(fences[i - 1]!);
    expect(await keysUnder(name)).toEqual([]);
  });

  it('an uncontended cycle is 2 txns at the server: the queueing put is the fence, above the last release', async () => {
    const name = uniqueName('m');
    const m = new EtcdMutex(await pool.session(), name);
    await (await m.acquire()).release(); // (the session's first lease and watches are set up)
    let lastRelease = BigInt((await pool.shared().kv.range({ key: Buffer.from('-') })).header.revision);
    const before = await serverCalls(server().endpoints[0]!, 'Txn');
    for (let i = 0; i < 10; i++) {
      const lease = await m.acquire();
      expect(lease.fence).toBeGreaterThan(lastRelease);
      await lease.release();
      lastRelease = BigInt((await pool.shared().kv.range({ key: Buffer.from('-') })).header.revision);
    }
    expect((await serverCalls(server().endpoints[0]!, 'Txn')) - before).toBe(20);
  });

  it('a waiter queues behind the newest participant by the tail hint, which goes with that participant\'s key', async () => {
    const name = uniqueName('m');
    const tail = async (): Promise<string | null> => pool.shared().get(`${name}#tail`).string();
    const [a, b, c] = await Promise.all([0, 1, 2].map(async () => new EtcdMutex(await pool.session(), name)));
    const held = await a!.acquire();
    expect(await tail()).toBe(a!.key);
    const bLease = b!.acquire();
    await until(() => b!.stats.predecessorWatches === 1);
    expect(await tail()).toBe(b!.key);
    const abort = new AbortController();
    const cLease = c!.acquire({ signal: abort.signal });
    await until(() => c!.stats.predecessorWatches === 1);
    expect(await tail()).toBe(c!.key);
    abort.abort(new Error('gave up'));
    await expect(cLease).rejects.toThrow('gave up');
    expect(await tail()).toBeNull(); // the cancelled newest waiter took its hint with its key
    await held.release();
    const next = await bLease;
    expect(next.fence).toBeGreaterThan(held.fence);
    expect(b!.stats.predecessorWakeups).toBe(1); // woken once, by its predecessor a
    await next.release();
    expect(await keysUnder(name)).toEqual([]);
    expect(await tail()).toBeNull();
  });

  it('a tail hint naming a key that is gone, or skipping a participant that writes none (a Go peer), costs a look, never the queue order', async () => {
    const name = uniqueName('m');
    const a = new EtcdMutex(await pool.session(), name);
    const held = await a.acquire();
    // A Go participant queues after a (its key, no hint), then a hint names a key long gone.
    const go = pool.shared().lease(30, { autoKeepAlive: false });
    const goKey = `${name}/${BigInt(await go.grant()).toString(16)}`;
    await go.put(goKey).value('go');
    await pool.shared().put(`${name}#tail`).value(`${name}/bad`);
    const b = new EtcdMutex(await pool.session(), name);
    let granted = false;
    const bLease = b.acquire().then((l) => ((granted = true), l));
    // It watched the hint (gone at once), looked, and now watches the Go participant, not a.
    await until(() => b.stats.predecessorWatches === 2);
    expect(b.stats.predecessorWakeups).toBe(1);
    await held.release();
    await until(async () => (await keysUnder(name)).length === 2 && !(await keysUnder(name)).includes(a.key));
    expect(granted).toBe(false);
    await go.revoke();
    const next = await bLease;
    expect(next.fence).toBeGreaterThan(held.fence);
    await next.release();
    expect(await keysUnder(name)).toEqual([]);
  });

  it('a tail hint naming a key outside the queue is ignored: neither waited on nor taken for a nested name', async () => {
    const name = uniqueName('m');
    const a = new EtcdMutex(await pool.session(), name);
    const held = await a.acquire();
    await pool.shared().put(`${name}.other/x`).value('not a participant');
    await pool.shared().put(`${name}#tail`).value(`${name}.other/x`);
    const b = new EtcdMutex(await pool.session(), name);
    const bLease = b.acquire({ timeoutMs: 10_000 });
    await until(() => b.stats.predecessorWatches > 0);
    await held.release();
    await (await bLease).release();
    expect(b.stats.predecessorWatches).toBe(1); // a, found by a look; never the foreign key
    await pool.shared().delete().key(`${name}.other/x`);
  });

  it('tryAcquire takes a free lock and returns undefined when another holds it, leaving no key behind', async () => {
    const name = uniqueName('m');
    const a = new EtcdMutex(await pool.session(), name);
    const b = new EtcdMutex(await pool.session(), name);
    const held = await a.tryAcquire();
    expect(held).toBeDefined();
    expect(await b.tryAcquire()).toBeUndefined();
    expect(await keysUnder(name)).toEqual([a.key]);
    await held!.release();
    const next = await b.tryAcquire();
    expect(next!.fence).toBeGreaterThan(held!.fence);
  });

  it('a timed-out acquire rejects with AcquireTimeoutError and removes its key', async () => {
    const name = uniqueName('m');
    const a = new EtcdMutex(await pool.session(), name);
    const b = new EtcdMutex(await pool.session(), name);
    await a.acquire();
    await expect(b.acquire({ timeoutMs: 300 })).rejects.toBeInstanceOf(AcquireTimeoutError);
    expect(await keysUnder(name)).toEqual([a.key]);
  });

  it('an aborted acquire rejects with the signal reason and removes its key', async () => {
    const name = uniqueName('m');
    const a = new EtcdMutex(await pool.session(), name);
    const b = new EtcdMutex(await pool.session(), name);
    await a.acquire();
    const ac = new AbortController();
    const p = b.acquire({ signal: ac.signal });
    await until(async () => (await keysUnder(name)).length === 2, 5000, 'b queued');
    const why = new Error('stop');
    ac.abort(why);
    await expect(p).rejects.toBe(why);
    expect(await keysUnder(name)).toEqual([a.key]);
  });

  it('isOwner yields a compare that fences the user\'s own txns', async () => {
    const name = uniqueName('m');
    const m = new EtcdMutex(await pool.session(), name);
    expect(() => m.isOwner()).toThrow(NotHeldError);
    const lease = await m.acquire();
    const data = Buffer.from(uniqueName('data'));
    const cmp = m.isOwner();
    const ok = await pool.shared().kv.txn({ compare: [cmp], success: [{ request_put: { key: data, value: Buffer.from('1') } }], failure: [] });
    expect(ok.succeeded).toBe(true);
    await lease.release();
    const stale = await pool.shared().kv.txn({ compare: [cmp], success: [{ request_put: { key: data, value: Buffer.from('2') } }], failure: [] });
    expect(stale.succeeded).toBe(false);
  });

  it('grants in FIFO order and each release wakes exactly one waiter (20 waiters)', async () => {
    const name = uniqueName('m');
    const holder = new EtcdMutex(await pool.session(), name);
    const first = await holder.acquire();
    const waiters: EtcdMutex[] = [];
    const order: number[] = [];
    const done: Promise<void>[] = [];
    for (let i = 0; i < 20; i++) {
      const w = new EtcdMutex(await pool.session(), name);
      waiters.push(w);
      done.push(
        w.acquire().then(async (l) => {
          order.push(i);
          await l.release();
        }),
      );
      await until(async () => (await keysUnder(name)).length === i + 2, 5000, `waiter ${i} queued`);
    }
    await until(() => waiters.every((w) => w.stats.predecessorWatches === 1), 5000, 'every waiter watching');
    await first.release();
    await Promise.all(done);
    expect(order).toEqual([...Array(20).keys()]);
    // One predecessor watch and one wake-up per waiter: no herd.
    expect(waiters.map((w) => w.stats.predecessorWakeups)).toEqual(Array(20).fill(1));
    expect(waiters.map((w) => w.stats.predecessorWatches)).toEqual(Array(20).fill(1));
  });

  it('contenders that release and re-queue at once (same key name, new incarnation) keep the queue moving', async () => {
    const name = uniqueName('m');
    const ms = await Promise.all(Array.from({ length: 5 }, async () => new EtcdMutex(await pool.session(), name)));
    let holders = 0;
    let maxHolders = 0;
    let fence = 0n;
    await Promise.all(
      ms.map(async (m) => {
        for (let i = 0; i < 30; i++) {
          const l = await m.acquire({ timeoutMs: 20_000 });
          maxHolders = Math.max(maxHolders, ++holders);
          expect(l.fence).toBeGreaterThan(fence);
          fence = l.fence;
          holders--;
          await l.release();
        }
      }),
    );
    expect(maxHolders).toBe(1);
  });

  it("a holder's signal aborts when its session is lost", async () => {
    const name = uniqueName('m');
    const s = await pool.session();
    const lease = await new EtcdMutex(s, name).acquire();
    await pool.shared().leaseClient.leaseRevoke({ ID: s.leaseId });
    await until(() => lease.signal.aborted, TTL * 1000 * 2, 'holder loss');
    expect(lease.signal.reason).toBeInstanceOf(LeaseLostError);
  });

  it("a holder whose key was deleted behind its back is refused by its owner-checked txns", async () => {
    const name = uniqueName('m');
    const m = new EtcdMutex(await pool.session(), name);
    await m.acquire();
    const cmp = m.isOwner();
    await pool.shared().delete().key(m.key);
    const r = await pool.shared().kv.txn({ compare: [cmp], success: [{ request_put: { key: Buffer.from(uniqueName('d')), value: Buffer.from('x') } }], failure: [] });
    expect(r.succeeded).toBe(false);
  });

  it('a holder hears its key deleted from outside in every term of one lease, not only the first, and not its own releases', async () => {
    const name = uniqueName('m');
    const m = new EtcdMutex(await pool.session(), name);
    // Terms on the same lease (the same key each time), each released by its holder: no loss.
    for (let i = 0; i < 3; i++) {
      const lease = await m.acquire();
      await lease.release();
      expect((lease.signal.reason as LeaseLostError).reason).toBe('released');
    }
    const lease = await m.acquire();
    await new Promise((r) => setTimeout(r, 100)); // a release's delete event, if late, would come now
    expect(lease.signal.aborted).toBe(false);
    await pool.shared().delete().key(m.key);
    await until(() => lease.signal.aborted, 2000, 'the holder heard the deletion');
    expect((lease.signal.reason as LeaseLostError).reason).toBe('expired');
    await m.close();
  });

  it('a waiter whose own key disappears rejects with SessionExpiredError at once', async () => {
    const name = uniqueName('m');
    const a = new EtcdMutex(await pool.session(), name);
    const b = new EtcdMutex(await pool.session(), name);
    await a.acquire();
    const p = b.acquire();
    p.catch(() => undefined);
    await until(() => b.stats.predecessorWatches === 1, 5000, 'b waiting');
    const t0 = performance.now();
    await pool.shared().delete().key(b.key);
    await expect(p).rejects.toBeInstanceOf(SessionExpiredError);
    expect(performance.now() - t0).toBeLessThan(1000);
  });

  it('a waiter hears its own key deleted in every wait of one lease, not only the first, and its own releases in between are not losses', async () => {
    const name = uniqueName('m');
    const a = new EtcdMutex(await pool.session(), name);
    const b = new EtcdMutex(await pool.session({ client: pool.client() }), name);
    for (let i = 1; i <= 3; i++) {
      const held = await a.acquire();
      const p = b.acquire({ timeoutMs: 5000 });
      await until(() => b.stats.predecessorWatches === i, 5000, `b waiting (${i})`);
      await held.release();
      await (await p).release(); // granted: the deletions of its earlier keys did not count
    }
    const held = await a.acquire();
    const p = b.acquire();
    p.catch(() => undefined);
    await until(() => b.stats.predecessorWatches === 4, 5000, 'b waiting again');
    await new Promise((r) => setTimeout(r, 100));
    const t0 = performance.now();
    await pool.shared().delete().key(b.key);
    await expect(p).rejects.toBeInstanceOf(SessionExpiredError);
    expect(performance.now() - t0).toBeLessThan(1000);
    await held.release();
  });

  it('rejects bad input and use after close with named errors', async () => {
    const s = await pool.session();
    expect(() => new EtcdMutex(s, '')).toThrow(ConfigError);
    expect(() => new EtcdMutex(s, 'a b')).toThrow(ConfigError);
    expect(() => new EtcdMutex(s, 'x/')).toThrow(ConfigError);
    expect(() => new EtcdMutex({} as never, 'x')).toThrow(ConfigError);
    const m = new EtcdMutex(s, uniqueName('m'));
    await expect(m.acquire({ timeoutMs: -1 })).rejects.toBeInstanceOf(ConfigError);
    await expect(m.acquire({ signal: 'x' as never })).rejects.toBeInstanceOf(ConfigError);
    await m.close();
    await expect(m.acquire()).rejects.toBeInstanceOf(ClosedError);
    const m2 = new EtcdMutex(s, uniqueName('m'));
    await s.close();
    await expect(m2.acquire()).rejects.toBeInstanceOf(ClosedError);
  });

  it('refuses a name that another name nests under, instead of queueing behind the nested holder', async () => {
    const outer = uniqueName('nest');
    const inner = new EtcdMutex(await pool.session(), `${outer}/inner`);
    const held = await inner.acquire();
    const m = new EtcdMutex(await pool.session(), outer);
    const err = await m.acquire({ timeoutMs: 5000 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as ConfigError).field).toBe('name');
    expect((err as ConfigError).message).toContain(`${outer}/inner`);
    expect(await m.tryAcquire().catch((e: unknown) => e)).toBeInstanceOf(ConfigError);
    // Only the nested holder's key and its tail hint: nothing of ours left behind, tail hint included.
    expect(await keysUnder(outer)).toEqual([`${outer}/inner#tail`, ...(await keysUnder(`${outer}/inner`))]);
    expect(await pool.shared().get(`${outer}#tail`).string()).toBeNull();
    await held.release();
    const lease = await m.acquire({ timeoutMs: 5000 }); // with the nested holder gone, it works
    await lease.release();
  });
});
