import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type pg from 'pg';
import { AcquireTimeoutError } from '../../src/core/errors.js';
import { PgSessionLock, withXactLock } from '../../src/recipes/postgres/index.js';
import { FaultProxy, PostgresServer } from '../../src/testing/index.js';
import { makePool } from './helpers.js';
import { timed } from '../helpers/wait.js';

/**
 * A wait's promises on Postgres in every phase: `timeoutMs` bounds the pool check-out too (a pool
 * whose every client is out must not hold the caller for callTimeoutMs), and an abort rejects
 * with exactly the caller's `signal.reason` — an Error, a string or a reason-less abort's
 * DOMException — whether the wait is for a connection or for the lock.
 */

/** How far past its bound a wait may settle (event-loop and cleanup latency, not work). */
const SLACK_MS = 250;

let server: PostgresServer;
let pool: pg.Pool;

beforeAll(async () => {
  server = await new PostgresServer().start();
  pool = makePool({ ...server.connectionConfig, max: 10 });
});
afterAll(async () => {
  await pool?.end();
  await server?.stop();
});

/** A pool of one whose client is checked out for the duration of `body`. */
async function withExhaustedPool(body: (p: pg.Pool) => Promise<void>): Promise<void> {
  const p = makePool({ ...server.connectionConfig, max: 1 });
  const taken = await p.connect();
  try {
    await body(p);
  } finally {
    taken.release();
    await p.end();
  }
}

const noop = async (): Promise<void> => undefined;

describe('timeoutMs bounds the pool check-out', () => {
  it('withXactLock and PgSessionLock.acquire on a pool whose only client is out time out within timeoutMs, not callTimeoutMs', async () => {
    await withExhaustedPool(async (p) => {
      const xact = await timed(withXactLock(p, 'bounds-pool', noop, { timeoutMs: 500 }));
      expect(xact.error).toBeInstanceOf(AcquireTimeoutError);
      expect(xact.ms).toBeLessThan(500 + SLACK_MS);
      const lock = new PgSessionLock(p, 'bounds-pool');
      const session = await timed(lock.acquire({ timeoutMs: 500 }));
      expect(session.error).toBeInstanceOf(AcquireTimeoutError);
      expect(session.ms).toBeLessThan(500 + SLACK_MS);
      await lock.close();
    });
  });

  it('behind a blackholed link, withXactLock gives up within timeoutMs (2 s) where callTimeoutMs is 5 s', async () => {
    const proxy = await new FaultProxy({ target: { port: server.port } }).start();
    const p = makePool({ ...server.connectionConfig, port: proxy.port, max: 2 });
    try {
      await withXactLock(p, 'bounds-blackhole', noop, { timeoutMs: 2000 }); // the link works
      proxy.blackhole();
      const r = await timed(withXactLock(p, 'bounds-blackhole', noop, { timeoutMs: 2000 }));
      expect(r.error).toBeInstanceOf(AcquireTimeoutError);
      expect(r.ms).toBeLessThan(2000 + SLACK_MS);
    } finally {
      proxy.heal();
      await p.end().catch(() => undefined);
      await proxy.stop();
    }
  });
});

describe('an abort rejects with exactly signal.reason', () => {
  const reasons: Array<[string, (ac: AbortController) => unknown]> = [
    ['an Error', (ac) => (ac.abort(new Error('mine')), ac.signal.reason)],
    ['a string', (ac) => (ac.abort('mine'), ac.signal.reason)],
    ['no reason (a DOMException)', (ac) => (ac.abort(), ac.signal.reason)],
  ];

  /** Starts `wait` with a fresh signal, aborts it after 100 ms, and expects exactly its reason. */
  async function rejectsWithReason(wait: (signal: AbortSignal) => Promise<unknown>, abort: (ac: AbortController) => unknown): Promise<void> {
    const ac = new AbortController();
    const pending = wait(ac.signal);
    pending.catch(() => undefined);
    await new Promise((r) => setTimeout(r, 100));
    const reason = abort(ac);
    const error = await pending.then(
      () => 'resolved',
      (e: unknown) => e,
    );
    expect(error).toBe(reason);
  }

  for (const [what, abort] of reasons) {
    it(`waiting for a pool connection, with ${what}: withXactLock, PgSessionLock.acquire and tryAcquire`, async () => {
      await withExhaustedPool(async (p) => {
        await rejectsWithReason((signal) => withXactLock(p, 'reason-pool', noop, { signal }), abort);
        const lock = new PgSessionLock(p, 'reason-pool');
        await rejectsWithReason((signal) => lock.acquire({ signal }), abort);
        await rejectsWithReason((signal) => lock.tryAcquire({ signal }), abort);
        await lock.close();
      });
    });

    it(`waiting for the lock, with ${what}: withXactLock and PgSessionLock.acquire`, async () => {
      const holder = new PgSessionLock(pool, 'reason-lock');
      const held = await holder.acquire({ timeoutMs: 5000 });
      try {
        await rejectsWithReason((signal) => withXactLock(pool, 'reason-lock', noop, { signal }), abort);
        const lock = new PgSessionLock(pool, 'reason-lock');
        await rejectsWithReason((signal) => lock.acquire({ signal }), abort);
        await lock.close();
      } finally {
        await held.release();
        await holder.close();
      }
    });
  }
});
