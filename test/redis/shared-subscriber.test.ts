import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import { RedisElection, RedisLock, RedisMembership } from '../../src/recipes/redis/index.js';
import { RedisServer } from '../../src/testing/index.js';
import { client } from './helpers.js';
import { pollValue } from '../helpers/wait.js';

/**
 * Many locks, elections and observers on one ioredis client share one subscriber connection
 * (issue 24: a connection per lock was 10,000 connections for 10,000 elections, Redis's default
 * maxclients), hand-offs still wake the next waiter at once, and the connection closes with the
 * last of them, so nothing keeps the process alive.
 */
let server: RedisServer;
let redis: Redis;
let admin: Redis;
beforeAll(async () => {
  server = await new RedisServer().start();
  [redis, admin] = [client(server.port), client(server.port)];
});
afterAll(async () => {
  redis?.disconnect();
  admin?.disconnect();
  await server?.stop();
});

const connections = async (): Promise<number> => Number(/connected_clients:(\d+)/.exec(await admin.info('clients'))?.[1]);

describe('one subscriber connection per client', () => {
  it('50 elections held, 50 locks waiting and an observer on one client use one subscriber connection; a release still wakes its waiter at once; the last close closes it', async () => {
    const base = await connections(); // redis + admin
    const p = `shared-${process.pid}`;
    const opts = { ttlMs: 2000, restartGuardMs: 0, retryMaxMs: 10_000 };
    const elections = Array.from({ length: 50 }, (_, i) => new RedisElection(redis, `${p}-e${i}`, { id: `e${i}`, ...opts }));
    await Promise.all(elections.map((e) => e.campaign({ timeoutMs: 10_000 })));
    const holders = Array.from({ length: 50 }, (_, i) => new RedisLock(redis, `${p}-l${i}`, opts));
    const leases = await Promise.all(holders.map((l) => l.acquire({ timeoutMs: 10_000 })));
    const waiters = Array.from({ length: 50 }, (_, i) => new RedisLock(redis, `${p}-l${i}`, opts));
    const waits = waiters.map((w) => w.acquire({ timeoutMs: 10_000 }));
    const membership = new RedisMembership(redis, `${p}-group`, { ttlMs: 2000 });
    const ctl = new AbortController();
    const watching = (async () => {
      for await (const _ of membership.observe({ signal: ctl.signal })) break;
    })();
    await watching;
    await pollValue(async () => ((await connections()) === base + 1 ? true : undefined), 5000);
    // Waiters poll only every ~10 s (retryMaxMs): a hand-off in well under that is the release message.
    const t0 = performance.now();
    await leases[0]!.release();
    const next = await waits[0]!;
    expect(performance.now() - t0).toBeLessThan(2000);
    await next.release();
    await Promise.all([...leases.slice(1).map((l) => l.release()), ...holders.map((h) => h.close())]);
    await Promise.all(waits.slice(1).map(async (w) => (await w).release()));
    ctl.abort();
    await Promise.all([...elections.map((e) => e.close()), ...waiters.map((w) => w.close()), membership.leave()]);
    await pollValue(async () => ((await connections()) === base ? true : undefined), 5000);
  });
});
