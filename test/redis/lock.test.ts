import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import { AcquireTimeoutError, ConfigError, LeaseLostError } from '../../src/index.js';
import { RedisElection, RedisLock } from '../../src/recipes/redis/index.js';
import { RENEW, runScript } from '../../src/recipes/redis/scripts.js';
import { RedisServer } from '../../src/testing/index.js';
import { client, eventually as until } from './helpers.js';

const prefix = 'lk:';
/** These tests are not about restarts: the restart guard is off (see faults.test.ts for it). */
const base = { keyPrefix: prefix, restartGuardMs: 0 };
let server: RedisServer;
let redis: Redis;
let n = 0;
const fresh = (): string => `lock-${++n}`;

beforeAll(async () => {
  server = await new RedisServer().start();
  redis = client(server.port);
});

afterAll(async () => {
  redis?.disconnect();
  await server?.stop();
});

describe('RedisLock', () => {
  it('grants a lease whose key always carries a TTL and whose fence grows with every holder', async () => {
    const lock = new RedisLock(redis, fresh(), { ...base, ttlMs: 5000 });
    const a = await lock.acquire();
    const pttl = await redis.pttl(`${prefix}lock:{${lock.name}}`);
    expect(pttl).toBeGreaterThan(0);
    expect(pttl).toBeLessThanOrEqual(5000);
    await a.release();
    const b = await lock.acquire();
    expect(b.fence).toBeGreaterThan(a.fence);
    expect(a.signal.aborted).toBe(true);
    expect((a.signal.reason as LeaseLostError).reason).toBe('released');
    await b.release();
    await lock.close();
  });

  it('seeds a new name’s fence from the server clock in microseconds', async () => {
    const lock = new RedisLock(redis, fresh(), { ...base });
    const [sec] = await redis.time();
    await using lease = await lock.acquire();
    expect(lease.fence).toBeGreaterThan(BigInt(sec ?? 0) * 1_000_000n);
    await lock.close();
  });

  it('seeds the fence from the server clock again when the counter alone was lost', async () => {
    const lock = new RedisLock(redis, fresh(), { ...base });
    await (await lock.acquire()).release();
    await redis.del(`${prefix}fence:{${lock.name}}`);
    const [sec] = await redis.time();
    await using lease = await lock.acquire();
    expect(lease.fence).toBeGreaterThan(BigInt(sec ?? 0) * 1_000_000n);
    await lock.close();
  });

  it('an uncontended acquire+release is 13 commands at the server, scripts and what they call included (no clock read in an open epoch)', async () => {
    const lock = new RedisLock(redis, fresh(), { ...base });
    await (await lock.acquire()).release(); // (subscribed, scripts loaded)
    await redis.config('RESETSTAT');
    for (let i = 0; i < 10; i++) await (await lock.acquire()).release();
    const stats = await redis.info('commandstats');
    const byCommand = Object.fromEntries([...stats.matchAll(/^cmdstat_(\w+):calls=(\d+)/gm)].filter((m) => m[1] !== 'config').map((m) => [m[1], Number(m[2])]));
    // Per cycle: EVALSHA ×2; acquire EXISTS, INFO, HMGET, INCR, SET, PUBLISH; release GET, DEL, HSET, EXISTS, PUBLISH.
    expect(byCommand).toEqual({ evalsha: 20, exists: 20, info: 10, hmget: 10, incr: 10, set: 10, publish: 20, get: 10, del: 10, hset: 10 });
    await lock.close();
  });

  it("the lost channel carries a grant only when the grant before it was not released by its holder; its own process gets no message per clean cycle", async () => {
    const name = fresh();
    const heard: string[] = [];
    const sub = client(server.port);
    await sub.subscribe(`${prefix}lost:{${name}}`, `${prefix}released:{${name}}`);
    sub.on('message', (channel: string) => heard.push(channel.split(':')[1]!));
    const a = new RedisLock(redis, name, { ...base });
    const b = new RedisLock(redis, name, { ...base });
    try {
      await (await a.acquire()).release(); // the first grant: nothing says the one before was released
      await until(async () => heard.includes('lost') || undefined);
      heard.length = 0;
      for (let i = 0; i < 5; i++) await (await a.acquire()).release();
      await (await b.acquire()).release(); // a clean hand-off to another object too
      await until(async () => heard.filter((c) => c === 'released').length === 6 || undefined);
      expect(heard.filter((c) => c === 'lost')).toEqual([]);
      // A holder whose key is deleted from outside is told by the next grant, at once.
      const held = await a.acquire();
      await redis.del(`${prefix}lock:{${name}}`);
      const next = await b.acquire();
      await until(async () => held.lost || undefined);
      expect(held.lostReason).toBe('expired');
      expect(heard).toContain('lost');
      await next.release();
      await held.release();
    } finally {
      await Promise.all([a.close(), b.close()]);
      sub.disconnect();
    }
  });

  it('refuses a second holder while the first holds, and tryAcquire says so without waiting', async () => {
    const name = fresh();
    const l1 = new RedisLock(redis, name, { ...base });
    const l2 = new RedisLock(redis, name, { ...base });
    const a = await l1.acquire();
    expect(await l2.tryAcquire()).toBeUndefined();
    await expect(l2.acquire({ timeoutMs: 200 })).rejects.toBeInstanceOf(AcquireTimeoutError);
    await a.release();
    const b = await l2.tryAcquire();
    expect(b?.fence).toBeGreaterThan(a.fence);
    await b?.release();
    await Promise.all([l1.close(), l2.close()]);
  });

  it('keeps the lease alive past several TTLs by renewing it', async () => {
    const lock = new RedisLock(redis, fresh(), { ...base, ttlMs: 1000 });
    const lease = await lock.acquire();
    await new Promise((r) => setTimeout(r, 3500));
    expect(lease.lost).toBe(false);
    expect(lease.remainingMs()).toBeGreaterThan(0);
    const other = new RedisLock(redis, lock.name, { ...base, ttlMs: 1000 });
    expect(await other.tryAcquire()).toBeUndefined();
    await lease.release();
    await Promise.all([lock.close(), other.close()]);
  });

  it('wakes a waiting acquire with the release message, long before its poll would', async () => {
    const name = fresh();
    const holder = new RedisLock(redis, name, { ...base, ttlMs: 60_000 });
    const waiter = new RedisLock(redis, name, { ...base, ttlMs: 60_000, retryMaxMs: 60_000 });
    const a = await holder.acquire();
    const pending = waiter.acquire({ timeoutMs: 20_000 });
    await new Promise((r) => setTimeout(r, 100)); // let the waiter subscribe and find it held
    await a.release();
    const b = await pending; // a poll would wait ≥ 30 s; the timeout is 20 s
    expect(b.fence).toBeGreaterThan(a.fence);
    await b.release();
    await Promise.all([holder.close(), waiter.close()]);
  });

  it('grants waiters in arrival order; a releaser that comes straight back joins the tail', async () => {
    const name = fresh();
    const locks = Array.from({ length: 4 }, () => new RedisLock(redis, name, { ...base }));
    const first = await locks[0]!.acquire();
    const order: number[] = [];
    const waits: Promise<void>[] = [];
    for (const i of [1, 2, 3]) {
      waits.push(
        locks[i]!.acquire({ timeoutMs: 20_000 }).then(async (l) => {
          order.push(i);
          await new Promise((r) => setTimeout(r, 20));
          await l.release();
        }),
      );
      await until(async () => ((await redis.zcard(`${prefix}queue:{${name}}`)) === i ? true : undefined));
    }
    await first.release();
    const again = locks[0]!.acquire({ timeoutMs: 20_000 }).then(async (l) => {
      order.push(0);
      await l.release();
    });
    await Promise.all([...waits, again]);
    expect(order).toEqual([1, 2, 3, 0]);
    expect(await redis.exists(`${prefix}queue:{${name}}`)).toBe(0);
    await Promise.all(locks.map((l) => l.close()));
  });

  it('tryAcquire does not jump the queue', async () => {
    const name = fresh();
    const [a, b, c] = [0, 1, 2].map(() => new RedisLock(redis, name, { ...base }));
    const held = await a!.acquire();
    const waiting = b!.acquire({ timeoutMs: 20_000 });
    await until(async () => ((await redis.zcard(`${prefix}queue:{${name}}`)) === 1 ? true : undefined));
    await redis.eval(`return redis.call('DEL', KEYS[1])`, 1, `${prefix}lock:{${name}}`); // the lock is free, B is next
    expect(await c!.tryAcquire()).toBeUndefined();
    const lb = await waiting;
    expect(lb.fence).toBeGreaterThan(held.fence);
    await lb.release();
    await Promise.all([a, b, c].map((l) => l!.close()));
  });

  it('an abandoned wait leaves the queue at once, and a vanished waiter loses its place after its TTL', async () => {
    const name = fresh();
    const [a, b, c] = [0, 1, 2].map(() => new RedisLock(redis, name, { ...base, retryMaxMs: 100 }));
    const held = await a!.acquire();
    const ac = new AbortController();
    const pb = b!.acquire({ signal: ac.signal });
    await until(async () => ((await redis.zcard(`${prefix}queue:{${name}}`)) === 1 ? true : undefined));
    ac.abort(new Error('gave up'));
    await expect(pb).rejects.toThrow('gave up');
    await until(async () => ((await redis.zcard(`${prefix}queue:{${name}}`)) === 0 ? true : undefined));
    // A waiter that vanished without leaving (crashed): an entry nobody refreshes.
    await redis.zadd(`${prefix}queue:{${name}}`, 0, 'ghost');
    const [sec] = await redis.time();
    await redis.zadd(`${prefix}alive:{${name}}`, (Number(sec) + 1) * 1000, 'ghost');
    await held.release();
    const lc = await c!.acquire({ timeoutMs: 10_000 }); // after the ghost's alive entry lapses
    expect(await redis.zscore(`${prefix}queue:{${name}}`, 'ghost')).toBeNull();
    await lc.release();
    await Promise.all([a, b, c].map((l) => l!.close()));
  });

  it('rejects a waiting acquire with the signal’s reason and leaves no lock behind', async () => {
    const name = fresh();
    const l1 = new RedisLock(redis, name, { ...base });
    const l2 = new RedisLock(redis, name, { ...base });
    const a = await l1.acquire();
    const ac = new AbortController();
    const p = l2.acquire({ signal: ac.signal });
    setTimeout(() => ac.abort(new Error('changed my mind')), 50);
    await expect(p).rejects.toThrow('changed my mind');
    await a.release();
    expect(await redis.exists(`${prefix}lock:{${name}}`)).toBe(0);
    await Promise.all([l1.close(), l2.close()]);
  });

  it('a renew carrying another holder’s token neither extends nor shortens the lock', async () => {
    const lock = new RedisLock(redis, fresh(), { ...base, ttlMs: 20_000 });
    await using _lease = await lock.acquire();
    const key = `${prefix}lock:{${lock.name}}`;
    expect(await runScript(redis, RENEW, [key], ['not-my-token', 100])).toBe(0);
    expect(await redis.pttl(key)).toBeGreaterThan(10_000);
    await lock.close();
  });

  it('aborts the lease with reason expired when the key is taken from under it, and never re-acquires', async () => {
    const lock = new RedisLock(redis, fresh(), { ...base, ttlMs: 600 });
    const lease = await lock.acquire();
    const key = `${prefix}lock:{${lock.name}}`;
    await redis.set(key, 'someone-else', 'PX', 10_000); // what a successor would look like
    await new Promise<void>((r) => lease.signal.addEventListener('abort', () => r(), { once: true }));
    expect((lease.signal.reason as LeaseLostError).reason).toBe('expired');
    await new Promise((r) => setTimeout(r, 500));
    expect(await redis.get(key)).toBe('someone-else');
    await lease.release();
    expect(await redis.get(key)).toBe('someone-else'); // release is owner-checked
    await lock.close();
  });

  it('aborts the lease with reason renew-failed as soon as a renew fails, long before the deadline', async () => {
    const own = client(server.port);
    const lock = new RedisLock(own, fresh(), { ...base, ttlMs: 3000 });
    const lease = await lock.acquire();
    own.disconnect(); // the next renew (at TTL/3) is refused by the client
    await new Promise<void>((r) => lease.signal.addEventListener('abort', () => r(), { once: true }));
    expect((lease.signal.reason as LeaseLostError).reason).toBe('renew-failed');
    expect(lease.remainingMs()).toBe(0);
    await lock.close();
  });

  it('refuses bad options with ConfigError naming the field', () => {
    expect(() => new RedisLock(redis, '')).toThrow(/^name:/);
    expect(() => new RedisLock(redis, 'a{b}')).toThrow(ConfigError);
    expect(() => new RedisLock({} as Redis, 'x')).toThrow(/^redis:/);
    expect(() => new RedisLock(redis, 'x', { ttlMs: 0 })).toThrow(/^ttlMs:/);
    expect(() => new RedisLock(redis, 'x', { ttlMs: 1000, safetyMarginMs: 0 })).toThrow(/^safetyMarginMs:/);
    expect(() => new RedisLock(redis, 'x', { ttlMs: 1000, safetyMarginMs: 700 })).toThrow(/^safetyMarginMs:/);
    expect(() => new RedisLock(redis, 'x', { ttlMs: 1000, restartGuardMs: 500 })).toThrow(/^restartGuardMs:/);
    expect(() => new RedisLock(redis, 'x', { keyPrefix: 'a\nb' })).toThrow(/^keyPrefix:/);
    expect(() => new RedisLock(redis, 'x', 5 as never)).toThrow(/^options:/);
  });
});

describe('the restart guard', () => {
  it('a just-started server grants nothing until the guard has passed since it started', async () => {
    const young = await new RedisServer().start();
    const r = client(young.port);
    try {
      const name = fresh();
      const lock = new RedisLock(r, name, { keyPrefix: 'guard:', ttlMs: 1500 });
      expect(await lock.tryAcquire()).toBeUndefined(); // writes the epoch marker: the guard holds
      expect(await r.exists(`guard:epoch:{${name}}`)).toBe(1);
      expect(await lock.tryAcquire()).toBeUndefined();
      const t0 = performance.now();
      const lease = await lock.acquire({ timeoutMs: 15_000 });
      expect(performance.now() - t0).toBeGreaterThan(200); // it did wait, for the rest of 1.5 s
      await lease.release();
      await lock.close();
    } finally {
      r.disconnect();
      await young.stop();
    }
  });

  it('an epoch seen past one guard is open to that guard and shorter ones only, and a new epoch closes it', async () => {
    const name = fresh();
    const marker = `open:epoch:{${name}}`;
    const [sec, usec] = await redis.time();
    const replid = /master_replid:(\w+)/.exec(await redis.info('replication'))?.[1] ?? '';
    // This epoch began 5 s ago on this replication history.
    await redis.hset(marker, 'replid', replid, 'since', (BigInt(sec ?? 0) * 1_000_000n + BigInt(usec ?? 0) - 5_000_000n).toString());
    const short = new RedisLock(redis, name, { keyPrefix: 'open:', ttlMs: 1000, restartGuardMs: 1000 });
    const long = new RedisLock(redis, name, { keyPrefix: 'open:', ttlMs: 1000, restartGuardMs: 60_000 });
    await (await short.acquire({ timeoutMs: 5000 })).release();
    expect(await redis.hget(marker, 'open')).toBe('1000'); // later grants with a guard ≤ 1 s read no clock
    expect(await long.tryAcquire()).toBeUndefined(); // 5 s is not past 60 s: the mark does not open it
    await (await short.acquire({ timeoutMs: 5000 })).release();
    // Another replication id (a promotion): a new epoch from this sight, which the mark does not outlive.
    await redis.hset(marker, 'replid', 'another-history');
    expect(await short.tryAcquire()).toBeUndefined();
    expect(await redis.hget(marker, 'open')).toBeNull();
    await short.close();
    await long.close();
  });

  it('a server up longer than the guard grants at once, though tenure has not seen its dataset', async () => {
    await until(async () => {
      const up = Number(/uptime_in_seconds:(\d+)/.exec(await redis.info('server'))?.[1]);
      return up >= 3 ? true : undefined; // up to 1 s more than the real uptime
    }, 10_000);
    const name = fresh();
    const lock = new RedisLock(redis, name, { keyPrefix: 'old-server:', ttlMs: 1000 });
    const lease = await lock.tryAcquire();
    expect(lease).toBeDefined();
    expect(await redis.exists(`old-server:epoch:{${name}}`)).toBe(1);
    await lease?.release();
    await lock.close();
  });
});

describe('RedisElection', () => {
  it('elects one candidate at a time, with a higher fence each term', async () => {
    const name = fresh();
    const c1 = new RedisElection(redis, name, { ...base, id: 'c1' });
    const c2 = new RedisElection(redis, name, { ...base, id: 'c2' });
    const t1 = await c1.campaign();
    const ac = new AbortController();
    let t2Settled = false;
    const p2 = c2.campaign({ signal: ac.signal }).finally(() => (t2Settled = true));
    await new Promise((r) => setTimeout(r, 150));
    expect(t2Settled).toBe(false);
    await c1.close();
    expect(t1.signal.aborted).toBe(true);
    const t2 = await p2;
    expect(t2.fence).toBeGreaterThan(t1.fence);
    await c2.close();
    expect(t2.signal.aborted).toBe(true);
    await expect(c2.campaign()).rejects.toMatchObject({ code: 'CLOSED' });
  });
});
