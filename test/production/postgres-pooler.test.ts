import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import pg from 'pg';
import { PgElection, PgSessionLock, PostgresFencedResource, withXactLock } from '../../src/recipes/postgres/index.js';
import { PgBouncerServer, PostgresServer } from '../../src/testing/index.js';
import { advisoryLocks, makePool, until } from '../postgres/helpers.js';

/**
 * Behind PgBouncer, as a new user would run it: every recipe keeps mutual exclusion and rising
 * fences in transaction mode and in session mode, releases on the backend that holds, and an
 * abandoned wait leaves no waiter at the real server.
 */
let postgres: PostgresServer;
let admin: pg.Pool;
const bouncers: Record<'transaction' | 'session', PgBouncerServer> = {} as never;
const pools: pg.Pool[] = [];

beforeAll(async () => {
  postgres = await new PostgresServer().start();
  admin = makePool(postgres.connectionConfig);
  // Two server connections: a client that lost its own is likely to be handed the holder's.
  bouncers.transaction = new PgBouncerServer({ postgres, poolMode: 'transaction', poolSize: 2 });
  bouncers.session = new PgBouncerServer({ postgres, poolMode: 'session', poolSize: 20 });
  await Promise.all(Object.values(bouncers).map((b) => b.start()));
});
// In session mode every idle pooled client keeps a server connection: end each test's pools.
afterEach(async () => {
  await Promise.all(pools.splice(0).map((p) => p.end().catch(() => undefined)));
});
afterAll(async () => {
  await admin?.end();
  await Promise.all(Object.values(bouncers).map((b) => b.stop()));
  await postgres?.stop();
});

function pool(mode: 'transaction' | 'session', max = 4): pg.Pool {
  const p = makePool({ ...bouncers[mode].connectionConfig(), max });
  pools.push(p);
  return p;
}

describe.each(['transaction', 'session'] as const)('behind PgBouncer in %s mode', (mode) => {
  it('a session lock excludes a client routed to the holder’s backend, and its release frees the lock', async () => {
    const a = new PgSessionLock(pool(mode), `s-${mode}`);
    const b = new PgSessionLock(pool(mode), `s-${mode}`);
    const lease = await a.acquire({ timeoutMs: 5000 });
    // Other clients' statements run meanwhile (in transaction mode on the other server connection).
    for (let i = 0; i < 5; i++) expect(await b.tryAcquire()).toBeUndefined();
    await lease.release();
    const next = await b.tryAcquire();
    expect(next).toBeDefined();
    expect(next!.fence).toBeGreaterThan(lease.fence);
    await next!.release();
    expect((await advisoryLocks(admin)).filter((l) => l.granted)).toEqual([]);
  });

  it('holder() names the participant that holds, also when participants take turns on shared server connections', async () => {
    const name = `h-${mode}`;
    // In transaction mode both run on the same two server connections, so each finds the other's
    // (name, backend) row on the backend it is given, again and again.
    const a = new PgSessionLock(pool(mode, 2), name, { id: 'a' });
    const b = new PgSessionLock(pool(mode, 2), name, { id: "b's \\ id" });
    const other = pool(mode, 2);
    for (let i = 0; i < 12; i++) {
      for (const lock of i % 3 === 0 ? [b, a] : [a, b]) {
        const lease = await lock.acquire({ timeoutMs: 5000 });
        try {
          expect(await lock.holder()).toEqual({ id: lock.id, fence: lease.fence });
        } finally {
          await lease.release();
        }
        if (i % 2 === 0) await other.query('SELECT 1'); // moves the next transaction's backend
      }
    }
    expect(await a.holder()).toBeUndefined();
  });

  it('an election has one leader at a time', async () => {
    const name = `e-${mode}`;
    const a = new PgElection(pool(mode), name, { id: 'a', backoff: { initialMs: 5, maxMs: 20 } });
    const b = new PgElection(pool(mode), name, { id: 'b', backoff: { initialMs: 5, maxMs: 20 } });
    const termA = await a.campaign();
    const pending = b.campaign();
    await new Promise((r) => setTimeout(r, 200)); // b tries many times meanwhile
    expect(termA.signal.aborted).toBe(false);
    await a.resign();
    const termB = await pending;
    expect(termB.fence).toBeGreaterThan(termA.fence);
    await Promise.all([a.close(), b.close()]);
  });

  it('withXactLock keeps mutual exclusion and rising fences across 4 pools × 4 contenders', async () => {
    let inside = 0;
    let overlaps = 0;
    let last = 0n;
    let rising = true;
    const worker = async (p: pg.Pool): Promise<void> => {
      for (let i = 0; i < 15; i++) {
        await withXactLock(p, `x-${mode}`, async ({ fence }) => {
          if (inside++ > 0) overlaps++;
          if (fence <= last) rising = false;
          last = fence;
          await new Promise((r) => setImmediate(r));
          inside--;
        });
      }
    };
    const ps = [pool(mode), pool(mode), pool(mode), pool(mode)];
    await Promise.all(ps.flatMap((p) => [worker(p), worker(p), worker(p), worker(p)]));
    expect(overlaps).toBe(0);
    expect(rising).toBe(true);
  });

  it('an abandoned wait is cancelled on the real backend: no waiter stays queued at the server', async () => {
    const holder = new PgSessionLock(pool(mode), `w-${mode}`);
    const waiter = new PgSessionLock(pool(mode), `w-${mode}`);
    const lease = await holder.acquire();
    await expect(waiter.acquire({ timeoutMs: 300 })).rejects.toMatchObject({ code: 'ACQUIRE_TIMEOUT' });
    const ctl = new AbortController();
    const xact = withXactLock(pool(mode), `w-${mode}`, () => undefined, { signal: ctl.signal });
    await until(async () => ((await advisoryLocks(admin)).some((l) => !l.granted) ? true : undefined), 5000);
    ctl.abort(new Error('gave up'));
    await expect(xact).rejects.toThrow('gave up');
    // Both waits ended at the server, without waiting for the holder.
    await until(async () => ((await advisoryLocks(admin)).every((l) => l.granted) ? true : undefined), 3000);
    expect(lease.signal.aborted).toBe(false);
    await lease.release();
  });
});

it('a fenced write on the lock’s own transaction needs no second connection (pool of 2, 6 contenders)', async () => {
  const p = pool('transaction', 2);
  const ledger = new PostgresFencedResource(p, 'ledger-own-tx');
  await admin.query('CREATE TABLE IF NOT EXISTS ledger (n int)');
  let grants = 0;
  const worker = async (): Promise<void> => {
    for (let i = 0; i < 20; i++) {
      await withXactLock(p, 'own-tx', async (ctx) => {
        await ledger.write(ctx.fence, (tx) => tx.query('INSERT INTO ledger VALUES (1)'), { client: ctx.client });
        grants++;
      }, { timeoutMs: 10_000 });
    }
  };
  await Promise.all(Array.from({ length: 6 }, worker));
  expect(grants).toBe(120);
  expect(Number((await admin.query('SELECT count(*) AS n FROM ledger')).rows[0].n)).toBe(120);
  expect(await ledger.highestFence()).toBeGreaterThan(0n);
});
