import type pg from 'pg';
import { afterAll, afterEach, beforeAll, expect, it } from 'vitest';
import { PgSessionLock } from '../../src/recipes/postgres/index.js';
import { FaultProxy, PostgresServer, spawnWorker, type WorkerHandle } from '../../src/testing/index.js';
import { advisoryLocks, fixture, makePool } from './helpers.js';
import { pollValue } from '../helpers/wait.js';

/**
 * The guard of a session lock with `ttlMs`: Postgres frees a connection's locks the moment the
 * connection ends, while a holder that is stalled (a pause, a busy event loop) or cut off learns
 * of it only when it next reads its socket, and believes it holds until its local deadline. A
 * grant that may follow such a holder is handed out only after that deadline can have passed; a
 * clean hand-off is not held back.
 */
const TTL_MS = 3000; // safetyMarginMs defaults to ttlMs / 5: a deadline 2,400 ms after an acknowledged heartbeat's send
let server: PostgresServer;
let pool: pg.Pool;
const workers: WorkerHandle[] = [];
const proxies: FaultProxy[] = [];

beforeAll(async () => {
  server = await new PostgresServer().start();
  pool = makePool({ ...server.connectionConfig, max: 6 });
});

afterEach(async () => {
  await Promise.all(workers.splice(0).map((w) => w.kill()));
  await Promise.all(proxies.splice(0).map((p) => p.stop()));
});

afterAll(async () => {
  await pool?.end();
  await server?.stop();
});

/** A logger that keeps the guard's "waiting out" lines. */
function guardLog(): { lines: string[]; logger: { debug(o: unknown, m?: string): void; info(): void; warn(): void; error(): void; child(): unknown } } {
  const lines: string[] = [];
  const logger = {
    debug: (_o: unknown, m?: string) => void (m?.includes('waiting out') && lines.push(m)),
    info: () => undefined,
    warn: () => undefined,
    error: () => undefined,
    child: () => logger,
  };
  return { lines, logger };
}

it('a holder stalled when its connection is cut: the next grant is handed out only after its local deadline', async () => {
  const name = 'guard-cut';
  const proxy = await new FaultProxy({ target: { port: server.port } }).start();
  proxies.push(proxy);
  const a = await spawnWorker(fixture('holder.ts'), [], { env: { PG_PORT: String(proxy.port), MODE: 'session', LOCK_NAME: name, TTL_MS: String(TTL_MS) } });
  workers.push(a);
  const fenceA = BigInt((await a.waitFor<{ fence: string }>('acquired')).data.fence);
  const { lines, logger } = guardLog();
  const b = new PgSessionLock(pool, name, { ttlMs: TTL_MS, logger: logger as never });
  const granted = b.acquire({ timeoutMs: 30_000 }).then((lease) => ({ lease, t: process.hrtime.bigint() }));
  // A's deadline now, then A stalls (it can no longer extend it: every later heartbeat reply
  // waits in its socket) and its link is cut: the server ends its session and frees the lock.
  const from = a.events.length;
  a.send({ cmd: 'deadline' });
  const deadline = BigInt((await a.waitFor<{ ns: string }>('deadline', { from })).data.ns);
  a.pause();
  proxy.cut();
  const { lease, t } = await granted;
  expect(lease.fence).toBeGreaterThan(fenceA);
  expect(t).toBeGreaterThan(deadline); // without the guard: granted at the cut, ~2 s before it
  expect(lines).toHaveLength(1);
  a.resume();
  expect((await a.waitFor<{ reason: string }>('lost')).data.reason).toMatch(/deadline|connection-lost|renew-failed/);
  await lease.release();
});

it('a clean release hands the lock over at once: the guard does not hold it back', async () => {
  const { lines, logger } = guardLog();
  const a = new PgSessionLock(pool, 'guard-clean', { ttlMs: TTL_MS, logger: logger as never });
  const b = new PgSessionLock(pool, 'guard-clean', { ttlMs: TTL_MS, logger: logger as never });
  for (let i = 0; i < 5; i++) {
    const held = await a.acquire();
    const next = b.acquire({ timeoutMs: 10_000 });
    await held.release();
    await (await next).release();
  }
  expect(lines).toEqual([]);
  // A waiter that gave up (a timeout) never held: no wait for it either.
  const held = await a.acquire();
  const c = new PgSessionLock(pool, 'guard-clean', { ttlMs: TTL_MS, logger: logger as never });
  await expect(c.acquire({ timeoutMs: 200 })).rejects.toMatchObject({ code: 'ACQUIRE_TIMEOUT' });
  const next = b.acquire({ timeoutMs: 10_000 });
  await held.release();
  await (await next).release();
  expect(lines).toEqual([]);
});

it("a holder that lost its own connection takes the lock again without waiting out itself (this process saw that lease end)", async () => {
  const proxy = await new FaultProxy({ target: { port: server.port } }).start();
  proxies.push(proxy);
  const via = makePool({ ...server.connectionConfig, port: proxy.port, max: 2 });
  try {
    const { lines, logger } = guardLog();
    const lock = new PgSessionLock(via, 'guard-self', { ttlMs: TTL_MS, logger: logger as never });
    const first = await lock.acquire();
    proxy.cut();
    await new Promise((r) => first.signal.addEventListener('abort', r, { once: true }));
    const again = await lock.acquire({ timeoutMs: 10_000 });
    expect(again.fence).toBeGreaterThan(first.fence);
    expect(lines).toEqual([]);
    await again.release();
    // Another participant would have waited: its own grant after a cut holder is the guarded case above.
  } finally {
    await via.end();
  }
});

it('after a server crash, a grant waits until the server has been up for a lease (every lock went with it)', async () => {
  const { lines, logger } = guardLog();
  const lock = new PgSessionLock(pool, 'guard-restart', { ttlMs: TTL_MS, logger: logger as never });
  await (await lock.acquire()).release();
  await server.restart({ hard: true });
  const restarted = process.hrtime.bigint();
  const lease = await lock.acquire({ timeoutMs: 30_000 });
  expect(Number(process.hrtime.bigint() - restarted) / 1e6).toBeGreaterThan(TTL_MS * 0.8 - 500);
  expect(lines).toHaveLength(1);
  await lease.release();
});

it('a holder whose backend is terminated: every grant after it waits out its deadline, also while the ended backend is still leaving pg_stat_activity', async () => {
  // The ended backend frees its locks (waking the grantee) a moment before it leaves
  // pg_stat_activity; a guard that looked only for backends that are gone read it as live in
  // about 1 grant of 40 on a quiet machine, more under load. The holder is on a pool of its own,
  // so the grantee's process has not seen its lease end (guardSql's `over`): another process's holder.
  const ttlMs = 600;
  const holders = makePool({ ...server.connectionConfig, max: 1 });
  const { lines, logger } = guardLog();
  const b = new PgSessionLock(pool, 'guard-terminated', { ttlMs, logger: logger as never });
  try {
    for (let round = 1; round <= 30; round++) {
      const a = new PgSessionLock(holders, 'guard-terminated', { ttlMs });
      const held = await a.acquire({ timeoutMs: 10_000 });
      const next = b.acquire({ timeoutMs: 10_000 });
      const backend = await pollValue(async () => {
        const name = (await advisoryLocks(pool)).filter((l) => l.classid === a.key.namespace >>> 0 && l.objid === a.key.key >>> 0);
        return name.some((l) => !l.granted) ? name.find((l) => l.granted)?.pid : undefined; // b queued behind a
      }, 5000);
      await pool.query('SELECT pg_terminate_backend($1)', [backend]);
      await (await next).release();
      expect(lines, `round ${round}: the grant after a terminated holder was handed out without waiting`).toHaveLength(round);
      await held.release().catch(() => undefined);
      await a.close();
    }
  } finally {
    await b.close();
    await holders.end();
  }
});
