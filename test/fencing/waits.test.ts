import { Redis } from 'ioredis';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AcquireTimeoutError, InMemoryFencedResource } from '../../src/index.js';
import { PostgresFencedResource } from '../../src/recipes/postgres/index.js';
import { RedisFencedResource } from '../../src/recipes/redis/index.js';
import { FaultProxy, PostgresServer, RedisServer } from '../../src/testing/index.js';
import { makePool } from '../postgres/helpers.js';
import { timed } from '../helpers/wait.js';

/**
 * A fenced write is a wait like every other (issue 25): `{ signal, timeoutMs }` bound it on a
 * blackholed link well inside `callTimeoutMs` (5 s here), it rejects with exactly `signal.reason`
 * or an AcquireTimeoutError, and on Postgres a write given up on commits nothing — also when it
 * was waiting for another writer's row lock.
 */

/** How far past its bound a write may settle (event-loop and cleanup latency, not work). */
const SLACK_MS = 400;
const CALL_MS = 5000;

let pgServer: PostgresServer;
let redisServer: RedisServer;
let seq = 0;

beforeAll(async () => {
  [pgServer, redisServer] = await Promise.all([new PostgresServer().start(), new RedisServer().start()]);
});
afterAll(async () => {
  await Promise.all([pgServer?.stop(), redisServer?.stop()]);
});

describe('PostgresFencedResource.write({ signal, timeoutMs })', () => {
  it('behind a blackholed link: timeoutMs gives up within its bound (AcquireTimeoutError), an abort rejects with exactly its reason; nothing commits', async () => {
    const proxy = await new FaultProxy({ target: { port: pgServer.port } }).start();
    const pool = makePool({ ...pgServer.connectionConfig, port: proxy.port, max: 4 });
    const direct = makePool({ ...pgServer.connectionConfig, max: 2 });
    const name = `waits-pg-${++seq}`;
    try {
      const r = new PostgresFencedResource(pool, name, { callTimeoutMs: CALL_MS });
      await r.write(1n, () => undefined, { timeoutMs: 2000 }); // the link works (and the schema exists)
      proxy.blackhole();
      const t = await timed(r.write(2n, () => undefined, { timeoutMs: 500 }));
      expect(t.error).toBeInstanceOf(AcquireTimeoutError);
      expect(t.ms).toBeLessThan(500 + SLACK_MS);
      const reason = new Error('shutting down');
      const c = new AbortController();
      setTimeout(() => c.abort(reason), 300);
      const a = await timed(r.write(3n, () => undefined, { signal: c.signal }));
      expect(a.error).toBe(reason);
      expect(a.ms).toBeLessThan(300 + SLACK_MS);
      proxy.heal();
      // Neither write committed (their connections were closed before COMMIT).
      expect(await new PostgresFencedResource(direct, name).highestFence()).toBe(1n);
    } finally {
      proxy.heal();
      await pool.end().catch(() => undefined);
      await direct.end();
      await proxy.stop();
    }
  });

  it("a write waiting for another writer's row lock, given up on, leaves the queue at once and never commits", async () => {
    const pool = makePool({ ...pgServer.connectionConfig, max: 4 });
    const name = `waits-pg-${++seq}`;
    try {
      const r = new PostgresFencedResource(pool, name);
      await r.write(1n, () => undefined);
      let release!: () => void;
      const holding = new Promise<void>((res) => (release = res));
      let entered!: () => void;
      const inside = new Promise<void>((res) => (entered = res));
      const first = r.write(5n, async () => {
        entered();
        await holding; // holds the resource's row lock
      });
      await inside;
      const c = new AbortController();
      const waiter = r.write(9n, () => undefined, { signal: c.signal });
      await new Promise((res) => setTimeout(res, 200)); // queued behind the row lock
      c.abort('gave up');
      const w = await timed(waiter);
      expect(w.error).toBe('gave up');
      expect(w.ms).toBeLessThan(SLACK_MS);
      const locks = await pool.query("SELECT count(*)::int AS n FROM pg_locks WHERE NOT granted AND locktype = 'transactionid'");
      expect(locks.rows[0].n).toBe(0); // the waiter's query was cancelled, not left queued
      release();
      await first;
      expect(await r.highestFence()).toBe(5n);
      const t = await timed(r.write(9n, () => undefined, { timeoutMs: 2000 }));
      expect(t.error).toBeUndefined();
    } finally {
      await pool.end();
    }
  });

  it('an already aborted signal: the function never runs; bad values are ConfigErrors before any I/O', async () => {
    const pool = makePool({ port: 1 }); // nothing listens: I/O would fail otherwise
    try {
      const r = new PostgresFencedResource(pool as pg.Pool, 'x');
      let ran = false;
      await expect(r.write(1n, () => void (ran = true), { signal: AbortSignal.abort('no') })).rejects.toBe('no');
      expect(ran).toBe(false);
      await expect(r.write(1n, () => 1, { timeoutMs: -1 })).rejects.toMatchObject({ code: 'CONFIG_INVALID', field: 'timeoutMs' });
      await expect(r.highestFence({ signal: 'x' as never })).rejects.toMatchObject({ code: 'CONFIG_INVALID', field: 'signal' });
    } finally {
      await pool.end();
    }
  });
});

describe('RedisFencedResource.write({ signal, timeoutMs })', () => {
  it('behind a blackholed link: timeoutMs gives up within its bound (AcquireTimeoutError), an abort rejects with exactly its reason', async () => {
    const proxy = await new FaultProxy({ target: { port: redisServer.port } }).start();
    const redis = new Redis({ port: proxy.port });
    const name = `waits-redis-${++seq}`;
    try {
      const r = new RedisFencedResource(redis, name, { callTimeoutMs: CALL_MS });
      await r.write(1n, (w) => w.set(`${name}:v`, 1), { timeoutMs: 2000 });
      proxy.blackhole();
      const t = await timed(r.write(2n, (w) => w.set(`${name}:v`, 2), { timeoutMs: 500 }));
      expect(t.error).toBeInstanceOf(AcquireTimeoutError);
      expect(t.ms).toBeLessThan(500 + SLACK_MS);
      const reason = new Error('shutting down'); // an Error that is not a tenure error: passed through as is
      const c = new AbortController();
      setTimeout(() => c.abort(reason), 300);
      const a = await timed(r.write(3n, (w) => w.set(`${name}:v`, 3), { signal: c.signal }));
      expect(a.error).toBe(reason);
      expect(a.ms).toBeLessThan(300 + SLACK_MS);
      const h = await timed(r.highestFence({ timeoutMs: 300 }));
      expect(h.error).toBeInstanceOf(AcquireTimeoutError);
      // Given up on before it is sent, nothing is written.
      let ran = false;
      await expect(r.write(4n, () => void (ran = true), { signal: AbortSignal.abort('no') })).rejects.toBe('no');
      expect(ran).toBe(false);
    } finally {
      proxy.heal();
      redis.disconnect();
      await proxy.stop();
    }
  });
});

describe('InMemoryFencedResource.write({ signal, timeoutMs })', () => {
  it('bounds the wait for its turn: given up on while queued, the function never runs', async () => {
    const r = new InMemoryFencedResource('waits');
    let release!: () => void;
    const first = r.write(1n, () => new Promise<void>((res) => (release = res)));
    let ran = false;
    const t = await timed(r.write(2n, () => void (ran = true), { timeoutMs: 100 }));
    expect(t.error).toBeInstanceOf(AcquireTimeoutError);
    release();
    await first;
    expect(ran).toBe(false);
    expect(await r.highestFence()).toBe(1n);
  });
});
