import type pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { sleep, whenAborted } from '../../src/core/abort.js';
import { LeaseLostError } from '../../src/core/errors.js';
import { PgSessionLock } from '../../src/recipes/postgres/index.js';
import { FaultProxy, PostgresServer } from '../../src/testing/index.js';
import { makePool, until } from './helpers.js';

/**
 * A lease lost at its local deadline while its connection still lives (a slow link: the
 * heartbeat's reply comes late) keeps that connection until the holder releases: closing it at
 * once ended the lock's transaction, and the name was granted elsewhere while the holder, told
 * only just now, was still stopping (a drain, `tenure run --grace`).
 */
const TTL = { ttlMs: 3000, safetyMarginMs: 1500 }; // heartbeats every 1 s; the deadline 1.5 s after the last acknowledged one's send
let server: PostgresServer;
let pool: pg.Pool;

beforeAll(async () => {
  server = await new PostgresServer().start();
  pool = makePool({ ...server.connectionConfig, max: 4 });
});

afterAll(async () => {
  await pool?.end();
  await server?.stop();
});

it("a lease lost at its local deadline on a slow link is not granted elsewhere until its holder releases", async () => {
  await using proxy = await new FaultProxy({ target: { port: server.port } }).start();
  const slow = makePool({ ...server.connectionConfig, port: proxy.port, max: 2, connectionTimeoutMillis: 10_000 });
  const a = new PgSessionLock(slow, 'kept', { ...TTL, callTimeoutMs: 10_000 });
  const b = new PgSessionLock(pool, 'kept', TTL);
  try {
    const lease = await a.acquire();
    proxy.delay(1000); // a round trip now takes 2 s: the next heartbeat's reply comes after the deadline
    await whenAborted(lease.signal);
    expect((lease.signal.reason as LeaseLostError).reason).toBe('deadline');
    // The server still holds a's transaction (the heartbeat reached it): nobody else gets the lock yet.
    for (let i = 0; i < 6; i++) {
      expect(await b.tryAcquire(), `granted elsewhere ${i * 100} ms after a's signal aborted`).toBeUndefined();
      await sleep(100);
    }
    await lease.release(); // the holder has stopped: now the lock may go
    const next = await until(async () => b.tryAcquire(), 10_000);
    expect(next.fence).toBeGreaterThan(lease.fence);
    await next.release();
  } finally {
    await a.close();
    await b.close();
    await slow.end();
  }
}, 30_000);
