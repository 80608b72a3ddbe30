import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AcquireTimeoutError, ConfigError, LeaseLostError } from '../../src/index.js';
import { PgElection, PgSessionLock, advisoryKey, tryWithXactLock, withXactLock } from '../../src/recipes/postgres/index.js';
import { PostgresServer } from '../../src/testing/index.js';
import { FENCE_MARKS, SCHEMA_LOCK } from '../../src/recipes/postgres/keys.js';
import { advisoryLocks, makePool, until } from './helpers.js';

let server: PostgresServer;
let pool: pg.Pool;

beforeAll(async () => {
  server = await new PostgresServer().start();
  pool = makePool({ ...server.connectionConfig, max: 8 });
});

afterAll(async () => {
  await pool?.end();
  await server?.stop();
});

describe('withXactLock', () => {
  it('runs the function holding the lock, with a fence that rises every time, and leaves no advisory lock behind', async () => {
    const seen: bigint[] = [];
    for (let i = 0; i < 3; i++) {
      await withXactLock(pool, 'xact-a', async ({ client, fence, signal }) => {
        expect(signal.aborted).toBe(false);
        const held = await client.query("SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()");
        expect(held.rows[0].n).toBe(1);
        seen.push(fence);
      });
    }
    expect(seen[1]).toBeGreaterThan(seen[0]!);
    expect(seen[2]).toBeGreaterThan(seen[1]!);
    expect(await advisoryLocks(pool)).toEqual([]);
  });

  it('releases at ROLLBACK when the function throws, and never reuses the rolled-back fence', async () => {
    let failedFence = 0n;
    await expect(
      withXactLock(pool, 'xact-b', ({ fence }) => {
        failedFence = fence;
        throw new Error('boom');
      }),
    ).rejects.toThrow('boom');
    expect(await advisoryLocks(pool)).toEqual([]);
    const next = await withXactLock(pool, 'xact-b', ({ fence }) => fence);
    expect(next).toBeGreaterThan(failedFence);
  });

  it('serializes holders: a second waits until the first commits', async () => {
    const order: string[] = [];
    let releaseFirst!: () => void;
    const first = withXactLock(pool, 'xact-c', async () => {
      order.push('first in');
      await new Promise<void>((r) => (releaseFirst = r));
      order.push('first out');
    });
    await until(async () => (order.length === 1 ? true : undefined));
    const second = withXactLock(pool, 'xact-c', () => void order.push('second in'));
    expect((await tryWithXactLock(pool, 'xact-c', () => 1)).acquired).toBe(false);
    await new Promise((r) => setTimeout(r, 100));
    releaseFirst();
    await Promise.all([first, second]);
    expect(order).toEqual(['first in', 'first out', 'second in']);
  });

  it('times out a wait with AcquireTimeoutError and rejects an aborted wait with the signal’s reason', async () => {
    let release!: () => void;
    const holder = withXactLock(pool, 'xact-d', () => new Promise<void>((r) => (release = r)));
    await until(async () => ((await advisoryLocks(pool)).length === 1 ? true : undefined));
    await expect(withXactLock(pool, 'xact-d', () => 1, { timeoutMs: 150 })).rejects.toBeInstanceOf(AcquireTimeoutError);
    const ac = new AbortController();
    const p = withXactLock(pool, 'xact-d', () => 1, { signal: ac.signal });
    setTimeout(() => ac.abort(new Error('stop waiting')), 100);
    await expect(p).rejects.toThrow('stop waiting');
    release();
    await holder;
    expect(await until(async () => ((await advisoryLocks(pool)).length === 0 ? true : undefined))).toBe(true);
  });

  it('aborts the signal when the transaction’s connection is terminated', async () => {
    const err = await withXactLock(pool, 'xact-e', async ({ client, signal }) => {
      const pid = (await client.query('SELECT pg_backend_pid() AS pid')).rows[0].pid as number;
      await pool.query('SELECT pg_terminate_backend($1)', [pid]);
      await until(async () => (signal.aborted ? true : undefined));
      return signal.reason as LeaseLostError;
    }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(LeaseLostError);
    expect((err as LeaseLostError).reason).toBe('connection-lost');
    expect(await advisoryLocks(pool)).toEqual([]);
  });

  it('refuses bad input with ConfigError naming the field', async () => {
    await expect(withXactLock(pool, '', () => 1)).rejects.toThrow(/^name:/);
    await expect(withXactLock(pool, 'x', 5 as never)).rejects.toThrow(/^fn:/);
    await expect(withXactLock({} as pg.Pool, 'x', () => 1)).rejects.toThrow(/^pool:/);
    await expect(withXactLock(pool, 'x', () => 1, { timeoutMs: -1 })).rejects.toThrow(/^timeoutMs:/);
    await expect(withXactLock(pool, 'x', () => 1, { namespace: 2 ** 31 })).rejects.toThrow(/^namespace:/);
    // tenure's own namespaces (its schema lock and the fence marks, holder.ts) are not for users.
    for (const ns of [SCHEMA_LOCK.namespace, FENCE_MARKS.high, FENCE_MARKS.low]) {
      await expect(withXactLock(pool, 'x', () => 1, { namespace: ns })).rejects.toMatchObject({ code: 'CONFIG_INVALID', field: 'namespace' });
      expect(() => new PgSessionLock(pool, 'x', { namespace: ns })).toThrow(/^namespace: .*reserved/);
    }
    await expect(tryWithXactLock(pool, 'a\u0000b', () => 1)).rejects.toBeInstanceOf(ConfigError);
  });
});

describe('PgSessionLock', () => {
  it('a waiter granted with less than a heartbeat period of its lease left confirms the grant first: its lease starts with about a full TTL, not about to end', async () => {
    const a = new PgSessionLock(pool, 'late-waiter', { ttlMs: 2000 });
    let offset = 0;
    const b = new PgSessionLock(pool, 'late-waiter', { ttlMs: 2000, clock: { now: () => performance.now() + offset } });
    const held = await a.acquire();
    const waiting = b.acquire();
    await until(async () => (await pool.query("SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock'")).rows[0].n === 1, 10_000);
    offset += 1300; // b has waited 1.3 s of its 2 s lease (deadline at 1.6 s): less than 667 ms left
    await held.release();
    const lease = await waiting;
    expect(lease.lost).toBe(false);
    expect(lease.remainingMs()).toBeGreaterThan(2000 / 3);
    await lease.release();
  });

  it('holds across transactions on a pinned client, and unlocks on release', async () => {
    const lock = new PgSessionLock(pool, 'session-a');
    const lease = await lock.acquire();
    const locks = await advisoryLocks(pool);
    expect(locks).toHaveLength(1);
    const k = advisoryKey('session-a');
    // The fence is shown with the lock itself, as its two marks (holder.ts).
    expect(locks[0]).toMatchObject({ granted: true, classid: k.namespace, objid: k.key >>> 0, fence: lease.fence });
    expect(await lock.holder()).toEqual({ id: lock.id, fence: lease.fence });
    expect(await new PgSessionLock(pool, 'session-a').tryAcquire()).toBeUndefined();
    await lease.release();
    expect(await advisoryLocks(pool)).toEqual([]);
    const again = await lock.acquire();
    expect(again.fence).toBeGreaterThan(lease.fence);
    await again.release();
  });

  it('shows every participant its holder, whatever characters name and id hold; a holder that took the key another way shows as its pid', async () => {
    const name = "it's a \\ name";
    const lock = new PgSessionLock(pool, name, { id: "o'id \\ x" });
    const other = new PgSessionLock(pool, name, { id: 'other' });
    for (let i = 0; i < 3; i++) {
      const lease = await lock.acquire();
      expect(await other.holder()).toEqual({ id: "o'id \\ x", fence: lease.fence });
      await lease.release();
      expect(await other.holder()).toBeUndefined();
      const next = await other.acquire();
      expect(await lock.holder()).toEqual({ id: 'other', fence: next.fence });
      await next.release();
    }
    let release!: () => void;
    const xact = withXactLock(pool, name, () => new Promise<void>((r) => (release = r)));
    await until(async () => ((await advisoryLocks(pool)).length === 1 ? true : undefined));
    const [held] = await advisoryLocks(pool);
    expect(await lock.holder()).toEqual({ id: `pid:${held!.pid}`, fence: undefined });
    release();
    await xact;
  });

  it('keeps one holder row per live backend: the rows of backends that are gone are dropped', async () => {
    const name = 'session-rows';
    const rows = async (): Promise<number[]> => (await pool.query('SELECT pid FROM tenure_holder WHERE name = $1 ORDER BY pid', [name])).rows.map((r: { pid: number }) => r.pid);
    const victim = makePool({ ...server.connectionConfig, max: 1 });
    const first = await new PgSessionLock(victim, name, { id: 'first' }).acquire();
    const [gone] = await advisoryLocks(pool);
    await first.release();
    expect(await rows()).toEqual([gone!.pid]);
    await victim.end(); // its backend exits; its row stays behind
    await until(async () => ((await pool.query('SELECT 1 FROM pg_stat_activity WHERE pid = $1', [gone!.pid])).rowCount === 0 ? true : undefined));
    // Another participant's first acquire on its connection drops the dead backend's row.
    const churny = makePool({ ...server.connectionConfig, max: 1 });
    const second = await new PgSessionLock(churny, name, { id: 'second' }).acquire();
    const [live] = await advisoryLocks(pool);
    expect(await rows()).toEqual([live!.pid]);
    await second.release();
    await churny.end();
  });

  it('survives pool churn because its client is pinned out of the pool', async () => {
    const churny = makePool({ ...server.connectionConfig, max: 3, idleTimeoutMillis: 10 });
    const lease = await new PgSessionLock(churny, 'session-churn').acquire();
    const [holder] = await advisoryLocks(pool);
    for (let round = 0; round < 5; round++) {
      await Promise.all(Array.from({ length: 6 }, () => churny.query('SELECT pg_sleep(0.01)')));
      await new Promise((r) => setTimeout(r, 40)); // idle clients are reaped
    }
    expect(churny.totalCount).toBe(1); // only the pinned client is left
    const [after] = await advisoryLocks(pool);
    expect(after).toEqual(holder);
    expect(lease.lost).toBe(false);
    await lease.release();
    expect(await advisoryLocks(pool)).toEqual([]);
    await churny.end();
  });

  it('aborts the lease when its connection dies, and the lock is gone with it', async () => {
    const lease = await new PgSessionLock(pool, 'session-b').acquire();
    const [holder] = await advisoryLocks(pool);
    await pool.query('SELECT pg_terminate_backend($1)', [holder!.pid]);
    await until(async () => (lease.signal.aborted ? true : undefined));
    expect((lease.signal.reason as LeaseLostError).reason).toBe('connection-lost');
    expect(await advisoryLocks(pool)).toEqual([]);
    await lease.release(); // idempotent, no throw
  });

  it('with ttlMs, heartbeats keep an idle holder’s connection alive past the timeout', async () => {
    const lease = await new PgSessionLock(pool, 'session-hb', { ttlMs: 600 }).acquire();
    await new Promise((r) => setTimeout(r, 1500));
    expect(lease.lost).toBe(false);
    expect(await advisoryLocks(pool)).toHaveLength(1);
    await lease.release();
  });

  it('with ttlMs, a lock granted after a wait longer than the TTL is live, its deadline counted from the grant', async () => {
    const first = await new PgSessionLock(pool, 'session-long-wait').acquire();
    const waiting = new PgSessionLock(pool, 'session-long-wait', { ttlMs: 600 }).acquire();
    await new Promise((r) => setTimeout(r, 1200)); // twice the waiter's TTL
    await first.release();
    const lease = await waiting;
    expect(lease.lost).toBe(false);
    expect(lease.remainingMs()).toBeGreaterThan(0);
    await new Promise((r) => setTimeout(r, 900)); // heartbeats keep it
    expect(lease.lost).toBe(false);
    await lease.release();
  });

  it('times out a wait, and an aborted wait leaves no lock and no waiter', async () => {
    const a = await new PgSessionLock(pool, 'session-c').acquire();
    await expect(new PgSessionLock(pool, 'session-c').acquire({ timeoutMs: 150 })).rejects.toBeInstanceOf(AcquireTimeoutError);
    await until(async () => ((await advisoryLocks(pool)).length === 1 ? true : undefined));
    await a.release();
    expect(await advisoryLocks(pool)).toEqual([]);
  });

  it('refuses bad options with ConfigError naming the field', () => {
    expect(() => new PgSessionLock(pool, '')).toThrow(/^name:/);
    expect(() => new PgSessionLock(pool, 'x', { ttlMs: 10 })).toThrow(/^ttlMs:/);
    expect(() => new PgSessionLock(pool, 'x', { ttlMs: 1000, safetyMarginMs: 900 })).toThrow(/^safetyMarginMs:/);
    expect(() => new PgSessionLock(pool, 'x', { safetyMarginMs: 10 })).toThrow(/^safetyMarginMs:/);
    expect(() => new PgSessionLock({ query() {}, connect() {} } as never, 'x')).toThrow(/^pool:/);
    expect(() => new PgElection(pool, 'x', { backoff: { initialMs: 100, maxMs: 10 } })).toThrow(/^backoff.maxMs:/);
  });
});

describe('PgElection', () => {
  it('elects one candidate at a time, with a higher fence each term', async () => {
    const c1 = new PgElection(pool, 'election', { id: 'c1', backoff: { initialMs: 10, maxMs: 50 } });
    const c2 = new PgElection(pool, 'election', { id: 'c2', backoff: { initialMs: 10, maxMs: 50 } });
    const t1 = await c1.campaign();
    let settled = false;
    const p2 = c2.campaign().finally(() => (settled = true));
    await new Promise((r) => setTimeout(r, 200));
    expect(settled).toBe(false);
    await c1.close();
    expect(t1.signal.aborted).toBe(true);
    const t2 = await p2;
    expect(t2.fence).toBeGreaterThan(t1.fence);
    await c2.close();
    expect(await advisoryLocks(pool)).toEqual([]);
    await expect(c2.campaign()).rejects.toMatchObject({ code: 'CLOSED' });
  });

  it('hands the term to the next candidate when the leader’s connection dies, with a higher fence', async () => {
    const c1 = new PgElection(pool, 'election-2', { id: 'c1', backoff: { initialMs: 10, maxMs: 50 } });
    const c2 = new PgElection(pool, 'election-2', { id: 'c2', backoff: { initialMs: 10, maxMs: 50 } });
    const t1 = await c1.campaign();
    const p2 = c2.campaign();
    const leader = (await advisoryLocks(pool)).find((l) => l.granted); // the waiter is queued too
    await pool.query('SELECT pg_terminate_backend($1)', [leader!.pid]);
    const t2 = await p2;
    expect(t1.signal.aborted).toBe(true);
    expect((t1.signal.reason as LeaseLostError).reason).toBe('connection-lost');
    expect(t2.fence).toBeGreaterThan(t1.fence);
    await Promise.all([c1.close(), c2.close()]);
    expect(await advisoryLocks(pool)).toEqual([]);
  });

  it("a queued candidate whose waiting connection is dropped queues again once; dropped twice, its campaign fails with the store's error", async () => {
    const c1 = new PgElection(pool, 'election-3', { id: 'c1', backoff: { initialMs: 10, maxMs: 50 } });
    const c2 = new PgElection(pool, 'election-3', { id: 'c2', backoff: { initialMs: 10, maxMs: 50 } });
    await c1.campaign();
    const p2 = c2.campaign();
    p2.catch(() => undefined);
    // pg_terminate_backend returns before the backend has gone, and a backend on its way out can
    // still be listed as waiting: the second wait looks for a waiter on another backend (it read
    // the ended one again in a full-suite run).
    const waiter = async (not?: number): Promise<number> => until(async () => (await advisoryLocks(pool)).find((l) => !l.granted && l.pid !== not)?.pid);
    const first = await waiter();
    await pool.query('SELECT pg_terminate_backend($1)', [first]);
    const second = await waiter(first); // queued again, on another connection
    expect(second).not.toBe(first);
    await pool.query('SELECT pg_terminate_backend($1)', [second]);
    await expect(p2).rejects.toMatchObject({ code: 'STORE_UNAVAILABLE' });
    await Promise.all([c1.close(), c2.close()]);
    expect(await advisoryLocks(pool)).toEqual([]);
  });
});
