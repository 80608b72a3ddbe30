import { afterAll, beforeAll, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import { sleep } from '../../src/core/abort.js';
import { RedisLock } from '../../src/recipes/redis/index.js';
import { FaultProxy, RedisServer } from '../../src/testing/index.js';
import { backdateBoot, client } from './helpers.js';

/**
 * Found by the chaos suite (redis, seed 5103): a waiter's poll sat in a partition for longer than
 * the lease's TTL − margin; once the link healed Redis granted it, and `acquire()` resolved with a
 * lease whose signal had aborted before it was handed out (its local deadline counts from when
 * the request was sent). Such a grant is no grant: the waiter must go on and get a live lease.
 */
const prefix = 'lg:';
let server: RedisServer;
let redis: Redis;

beforeAll(async () => {
  server = await new RedisServer().start();
  redis = client(server.port);
  redis.on('error', () => undefined);
  await backdateBoot(redis, prefix);
});

afterAll(async () => {
  redis?.disconnect();
  await server?.stop();
});

it('a grant that reaches the waiter after its own local deadline is not handed out: the waiter gets a live lease', async () => {
  const name = 'late-grant';
  const opts = { keyPrefix: prefix, ttlMs: 1000, safetyMarginMs: 250, retryMaxMs: 100 };
  await using proxy = await new FaultProxy({ target: { port: server.port } }).start();
  const viaProxy = client(proxy.port);
  viaProxy.on('error', () => undefined);
  const lockA = new RedisLock(redis, name, opts);
  const lockB = new RedisLock(viaProxy, name, opts);
  try {
    const a = await lockA.acquire({ timeoutMs: 10_000 });
    const waiting = lockB.acquire({ timeoutMs: 30_000 });
    await sleep(300); // B is queued and polls every 50–100 ms
    proxy.blackhole();
    await sleep(300); // B's next poll is now held in the partition
    await a.release();
    await sleep(1200); // more than B's TTL − margin since that poll was sent
    proxy.heal(); // the held poll reaches Redis, which grants it, too late to be used
    const b = await waiting;
    expect(b.signal.aborted).toBe(false);
    expect(b.lost).toBe(false);
    expect(b.remainingMs()).toBeGreaterThan(0);
    await b.release();
  } finally {
    await Promise.all([lockA.close(), lockB.close()]);
    viaProxy.disconnect();
  }
});
