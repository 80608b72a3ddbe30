import type pg from 'pg';
import { afterAll, afterEach, beforeAll, expect, it } from 'vitest';
import { PgSessionLock, PostgresFencedResource, withXactLock } from '../../src/recipes/postgres/index.js';
import { FaultProxy, PostgresServer, spawnWorker, type WorkerHandle } from '../../src/testing/index.js';
import { advisoryLocks, fixture, makePool, until } from './helpers.js';

/**
 * Process-level faults for the Postgres locks: holders in their own processes, SIGSTOPped,
 * SIGKILLed or cut off, with events stamped on CLOCK_MONOTONIC.
 */
let server: PostgresServer;
let pool: pg.Pool;
const workers: WorkerHandle[] = [];
const proxies: FaultProxy[] = [];

beforeAll(async () => {
  server = await new PostgresServer().start();
  pool = makePool({ ...server.connectionConfig, max: 6 });
  await pool.query('CREATE TABLE data (k text PRIMARY KEY, v text NOT NULL)');
});

afterEach(async () => {
  await Promise.all(workers.splice(0).map((w) => w.kill()));
  await Promise.all(proxies.splice(0).map((p) => p.stop()));
});

afterAll(async () => {
  await pool?.end();
  await server?.stop();
});

async function holder(env: Record<string, string>, port = server.port): Promise<WorkerHandle> {
  const w = await spawnWorker(fixture('holder.ts'), [], { env: { PG_PORT: String(port), ...env } });
  workers.push(w);
  return w;
}

const read = async (k: string): Promise<string | undefined> => (await pool.query('SELECT v FROM data WHERE k = $1', [k])).rows[0]?.v as string | undefined;

it("Kleppmann's scenario, session lock with ttlMs: a holder paused past its lease is cut off, and its late write is rejected", async () => {
  const name = 'k-session';
  const a = await holder({ MODE: 'session', LOCK_NAME: name, TTL_MS: '1500', RESOURCE: name });
  const fenceA = BigInt((await a.waitFor<{ fence: string }>('acquired')).data.fence);
  a.pause();
  const b = await new PgSessionLock(pool, name).acquire({ timeoutMs: 20_000 }); // the server ended A's idle session
  expect(b.fence).toBeGreaterThan(fenceA);
  const resource = new PostgresFencedResource(pool, name);
  await resource.write(b.fence, (tx) => tx.query("INSERT INTO data (k, v) VALUES ($1, 'B') ON CONFLICT (k) DO UPDATE SET v = 'B'", [name]));
  const from = a.events.length;
  a.resume();
  const lost = await a.waitFor<{ reason: string }>('lost', { from });
  expect(['deadline', 'connection-lost', 'renew-failed']).toContain(lost.data.reason);
  a.send({ cmd: 'write', value: 'A' });
  expect((await a.waitFor('write', { from })).data).toEqual({ ok: false, code: 'STALE_FENCE' });
  expect(await read(name)).toBe('B');
  expect(b.lost).toBe(false);
  await b.release();
});

it("Kleppmann's scenario, xact lock with idleTimeoutMs: a holder paused mid-transaction is cut off, and its late write is rejected", async () => {
  const name = 'k-xact';
  const a = await holder({ MODE: 'xact', LOCK_NAME: name, IDLE_MS: '1000', RESOURCE: name });
  const fenceA = BigInt((await a.waitFor<{ fence: string }>('acquired')).data.fence);
  a.pause();
  const fenceB = await withXactLock(pool, name, async ({ fence, client }) => {
    await new PostgresFencedResource(pool, name).write(fence, () => undefined);
    await client.query("INSERT INTO data (k, v) VALUES ($1, 'B') ON CONFLICT (k) DO UPDATE SET v = 'B'", [name]);
    return fence;
  }, { timeoutMs: 20_000 });
  expect(fenceB).toBeGreaterThan(fenceA);
  const from = a.events.length;
  a.resume();
  expect((await a.waitFor<{ reason: string }>('lost', { from })).data.reason).toBe('connection-lost');
  a.send({ cmd: 'write', value: 'A' });
  expect((await a.waitFor('write', { from })).data).toEqual({ ok: false, code: 'STALE_FENCE' });
  expect(await read(name)).toBe('B');
});

it('a session holder whose link is blackholed aborts its signal before anyone else is granted the lock', async () => {
  const name = 'blackhole';
  const proxy = await new FaultProxy({ target: { port: server.port } }).start();
  proxies.push(proxy);
  const a = await holder({ MODE: 'session', LOCK_NAME: name, TTL_MS: '2000' }, proxy.port);
  const fenceA = BigInt((await a.waitFor<{ fence: string }>('acquired')).data.fence);
  proxy.blackhole();
  const lock = new PgSessionLock(pool, name);
  const { lease: b, sentNs } = await until(async () => {
    const sentNs = process.hrtime.bigint();
    const lease = await lock.tryAcquire();
    return lease && { lease, sentNs };
  }, 30_000, 10);
  const lost = await a.waitFor<{ reason: string }>('lost');
  expect(lost.data.reason).toBe('deadline');
  expect(lost.t).toBeLessThan(sentNs);
  expect(b.fence).toBeGreaterThan(fenceA);
  await b.release();
});

it('pg_locks shows no advisory lock left after SIGKILLed holders, session or transaction', async () => {
  const s = await holder({ MODE: 'session', LOCK_NAME: 'killed-session' });
  const x = await holder({ MODE: 'xact', LOCK_NAME: 'killed-xact' });
  await Promise.all([s.waitFor('acquired'), x.waitFor('acquired')]);
  expect((await advisoryLocks(pool)).filter((l) => l.granted)).toHaveLength(2);
  await Promise.all([s.kill(), x.kill()]);
  expect(await until(async () => ((await advisoryLocks(pool)).length === 0 ? true : undefined))).toBe(true);
});

it('pg_locks shows no advisory lock left after transactions end, whichever way they end', async () => {
  await withXactLock(pool, 'ends', () => undefined);
  await withXactLock(pool, 'ends', () => Promise.reject(new Error('x'))).catch(() => undefined);
  const x = await holder({ MODE: 'xact', LOCK_NAME: 'ends-worker' });
  await x.waitFor('acquired');
  expect(await advisoryLocks(pool)).toHaveLength(1);
  x.send({ cmd: 'finish' });
  expect((await x.waitFor('xact-ended')).data).toEqual({ committed: true });
  expect(await advisoryLocks(pool)).toEqual([]);
});
