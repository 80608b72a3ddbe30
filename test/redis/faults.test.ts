import { afterAll, afterEach, beforeAll, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import { RedisFencedResource, RedisLock } from '../../src/recipes/redis/index.js';
import { FaultProxy, RedisServer, spawnWorker, type WorkerHandle } from '../../src/testing/index.js';
import { backdateBoot, client, eventually, fixture } from './helpers.js';

/**
 * Process-level faults: holders run in their own processes (SIGSTOP, link blackholed, Redis
 * paused or restarted) and report events stamped with CLOCK_MONOTONIC, comparable with ours.
 */
const prefix = 'f:';
let server: RedisServer;
let redis: Redis;
const workers: WorkerHandle[] = [];
const proxies: FaultProxy[] = [];

beforeAll(async () => {
  server = await new RedisServer().start();
  redis = client(server.port);
  redis.on('error', () => undefined);
  await backdateBoot(redis, prefix, 'kleppmann', 'blackhole', 'paused-server', 'restart');
});

afterEach(async () => {
  await Promise.all(workers.splice(0).map((w) => w.kill()));
  await Promise.all(proxies.splice(0).map((p) => p.stop()));
});

afterAll(async () => {
  redis?.disconnect();
  await server?.stop();
});

async function holder(name: string, env: Record<string, string>, port = server.port): Promise<WorkerHandle> {
  const w = await spawnWorker(fixture('holder.ts'), [], {
    env: { REDIS_PORT: String(port), LOCK_NAME: name, PREFIX: prefix, FENCE_KEY: `${name}:fence`, DATA_KEY: `${name}:data`, ...env },
  });
  workers.push(w);
  return w;
}

/** Polls tryAcquire; returns the lease and the monotonic stamp taken just before the winning try. */
async function grant(lock: RedisLock): Promise<{ lease: NonNullable<Awaited<ReturnType<RedisLock['tryAcquire']>>>; sentNs: bigint }> {
  return eventually(async () => {
    const sentNs = process.hrtime.bigint();
    const lease = await lock.tryAcquire();
    return lease && { lease, sentNs };
  }, 30_000, 5);
}

it("Kleppmann's scenario: a paused holder's late write is rejected and its late renew and release leave the successor alone", async () => {
  const name = 'kleppmann';
  const lockKey = `${prefix}lock:{${name}}`;
  const a = await holder(name, { TTL_MS: '1000', MARGIN_MS: '250' });
  const fenceA = BigInt((await a.waitFor<{ fence: string }>('acquired')).data.fence);
  a.pause();
  const lockB = new RedisLock(redis, name, { keyPrefix: prefix, ttlMs: 8000 });
  const b = await lockB.acquire({ timeoutMs: 15_000 }); // after A's key expired at Redis
  expect(b.fence).toBeGreaterThan(fenceA);
  const resource = new RedisFencedResource(redis, `${name}:fence`);
  await resource.write(b.fence, (w) => w.set(`${name}:data`, 'B'));

  const from = a.events.length;
  a.resume(); // A's overdue timers fire now: a late renew, then the deadline
  const lost = await a.waitFor<{ reason: string }>('lost', { from });
  expect(['deadline', 'expired']).toContain(lost.data.reason);
  a.send({ cmd: 'write', value: 'A' });
  expect((await a.waitFor('write', { from })).data).toEqual({ ok: false, code: 'STALE_FENCE' });
  expect(await redis.get(`${name}:data`)).toBe('B');
  // A's late renew asked for PEXPIRE 1000; B's key keeps B's own TTL (8 s, renewed every 2.7 s).
  expect(await redis.pttl(lockKey)).toBeGreaterThan(4000);
  a.send({ cmd: 'release' });
  expect((await a.waitFor('released', { from })).data).toEqual({});
  expect(await redis.exists(lockKey)).toBe(1);
  expect(b.lost).toBe(false);
  expect(await new RedisLock(redis, name, { keyPrefix: prefix }).tryAcquire()).toBeUndefined();
  await b.release();
  await lockB.close();
});

it('a holder whose link is blackholed aborts its signal before anyone else is granted the lock', async () => {
  const name = 'blackhole';
  const proxy = await new FaultProxy({ target: { port: server.port } }).start();
  proxies.push(proxy);
  const a = await holder(name, { TTL_MS: '2000', MARGIN_MS: '500' }, proxy.port);
  const fenceA = BigInt((await a.waitFor<{ fence: string }>('acquired')).data.fence);
  proxy.blackhole();
  const lockB = new RedisLock(redis, name, { keyPrefix: prefix, ttlMs: 2000 });
  const { lease: b, sentNs } = await grant(lockB);
  const lost = await a.waitFor<{ reason: string }>('lost');
  expect(lost.data.reason).toBe('deadline');
  expect(lost.t).toBeLessThan(sentNs);
  expect(b.fence).toBeGreaterThan(fenceA);
  await b.release();
  await lockB.close();
});

it('a holder whose Redis is paused aborts on its local deadline, before the lock can pass on', async () => {
  const name = 'paused-server';
  const a = await holder(name, { TTL_MS: '2000', MARGIN_MS: '500' });
  const fenceA = BigInt((await a.waitFor<{ fence: string }>('acquired')).data.fence);
  const pausedNs = process.hrtime.bigint();
  await server.pause();
  let lost;
  try {
    lost = await a.waitFor<{ reason: string }>('lost', { timeoutMs: 15_000 });
  } finally {
    await server.resume();
  }
  expect(lost.data.reason).toBe('deadline');
  expect(lost.t - pausedNs).toBeLessThan(2000n * 1_000_000n); // within one TTL of the last contact
  const lockB = new RedisLock(redis, name, { keyPrefix: prefix, ttlMs: 2000 });
  const { lease: b, sentNs } = await grant(lockB);
  expect(lost.t).toBeLessThan(sentNs);
  expect(b.fence).toBeGreaterThan(fenceA);
  await b.release();
  await lockB.close();
});

it('Redis killed and restarted without persistence mid-hold: no second holder while the first may live, and fences keep rising', async () => {
  const name = 'restart';
  const guardMs = 3000;
  const proxy = await new FaultProxy({ target: { port: server.port } }).start();
  proxies.push(proxy);
  // Fences before the restart: a few holders, then A (which will not hear of the restart).
  const lockB = new RedisLock(redis, name, { keyPrefix: prefix, ttlMs: guardMs });
  let maxBefore = 0n;
  for (let i = 0; i < 3; i++) {
    const l = await lockB.acquire({ timeoutMs: 10_000 });
    maxBefore = l.fence;
    await l.release();
  }
  const a = await holder(name, { TTL_MS: String(guardMs), MARGIN_MS: '600', GUARD_MS: String(guardMs) }, proxy.port);
  const fenceA = BigInt((await a.waitFor<{ fence: string }>('acquired')).data.fence);
  expect(fenceA).toBeGreaterThan(maxBefore);
  proxy.blackhole(); // A keeps believing in its lease; only its local deadline can end it
  const killedNs = process.hrtime.bigint();
  await server.restart({ hard: true }); // SIGKILL, start again: the dataset is empty
  expect(await eventually(async () => ((await redis.dbsize()) === 0 ? true : undefined))).toBe(true);

  const { lease: b, sentNs } = await grant(lockB);
  const lost = await a.waitFor('lost');
  expect(lost.t).toBeLessThan(sentNs); // never overlapped: A's signal aborted before B's grant
  expect(sentNs - killedNs).toBeGreaterThanOrEqual(BigInt(guardMs * 0.9) * 1_000_000n); // the guard held
  expect(b.fence).toBeGreaterThan(fenceA);
  await b.release();
  await lockB.close();
});

it("an abort with the caller's own Error while a Redis call is in flight (a blackholed link) rejects with exactly that Error, on acquire and tryAcquire", async () => {
  const proxy = await new FaultProxy({ target: { port: server.port } }).start();
  proxies.push(proxy);
  const through = client(proxy.port);
  through.on('error', () => undefined);
  const lock = new RedisLock(through, 'abort-in-flight', { keyPrefix: prefix, ttlMs: 2000, restartGuardMs: 0 });
  try {
    await (await lock.acquire({ timeoutMs: 10_000 })).release(); // the link works
    proxy.blackhole();
    for (const call of [(signal: AbortSignal) => lock.acquire({ signal }), (signal: AbortSignal) => lock.tryAcquire({ signal })]) {
      const ac = new AbortController();
      const reason = new Error('mine');
      setTimeout(() => ac.abort(reason), 200);
      await expect(call(ac.signal)).rejects.toBe(reason);
    }
  } finally {
    proxy.heal();
    await lock.close().catch(() => undefined);
    through.disconnect();
  }
});
