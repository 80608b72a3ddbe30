import type pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { sleep } from '../../src/core/abort.js';
import { PgSessionLock } from '../../src/recipes/postgres/index.js';
import { FaultProxy, PostgresServer } from '../../src/testing/index.js';
import { advisoryLocks, makePool, until } from './helpers.js';

/**
 * Found by the chaos suite (postgres, manager kind, seed 6104): a candidate was frozen while its
 * try's reply was on the way; Postgres granted the lock, timed the idle transaction out after the
 * TTL and gave the lock to another; when the candidate woke, the old reply made `tryAcquire()`
 * resolve with a lease already past its local deadline (counted from the query's send), and the
 * checker saw two live terms. A grant that comes back after its own deadline is no grant unless
 * one more round trip on its connection proves the transaction, and so the lock, still lives.
 */
const TTL = { ttlMs: 600, safetyMarginMs: 150 }; // the deadline: 450 ms after the send
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

it('a try whose grant comes back after its own local deadline takes nothing, and leaves nothing locked', async () => {
  await using proxy = await new FaultProxy({ target: { port: server.port } }).start();
  const slow = makePool({ ...server.connectionConfig, port: proxy.port, max: 2, connectionTimeoutMillis: 10_000 });
  try {
    await slow.query('SELECT 1'); // connected (and the schema in place) before the link slows down
    const lock = new PgSessionLock(slow, 'late-try', { ...TTL, callTimeoutMs: 10_000 });
    await lock.tryAcquire().then((l) => l?.release()); // schema and session settings warmed up
    proxy.delay(400); // every round trip now takes 800 ms: each reply comes after the deadline
    const lease = await lock.tryAcquire();
    expect(lease).toBeUndefined();
    proxy.heal();
    await until(async () => ((await advisoryLocks(pool)).length === 0 ? true : undefined), 10_000);
    await lock.close();
  } finally {
    await slow.end();
  }
});

it('a wait that outlasts ttlMs − safetyMarginMs still gets a live lease, its deadline counted from a fresh round trip', async () => {
  // A TTL whose heartbeats (every ttlMs / 3, each with 1.5 s to come back) a suite running beside
  // it on two cores does not starve: the lease must be lost only by the late grant, never by load.
  const wait = { ttlMs: 2000, safetyMarginMs: 500 }; // the deadline: 1,500 ms after the send
  const a = await new PgSessionLock(pool, 'late-wait', wait).acquire();
  const b = new PgSessionLock(pool, 'late-wait', wait);
  const waiting = b.acquire({ timeoutMs: 10_000 });
  await sleep(2000); // B's lock query has waited longer than its deadline
  await a.release();
  const lease = await waiting;
  try {
    expect(lease.lost).toBe(false);
    expect(lease.remainingMs()).toBeGreaterThan(0);
    await sleep(2500); // heartbeats keep it past one TTL
    expect(lease.lost).toBe(false);
  } finally {
    await lease.release(); // (a failed check must not leave a pinned client for afterAll's pool.end())
  }
  expect(await advisoryLocks(pool)).toEqual([]);
});
