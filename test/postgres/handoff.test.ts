import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type pg from 'pg';
import { PgElection } from '../../src/recipes/postgres/index.js';
import { PostgresServer } from '../../src/testing/index.js';
import { advisoryLocks, makePool } from './helpers.js';
import { pollValue, settlesWithin } from '../helpers/wait.js';

/**
 * On a direct connection a PgElection waiter waits in the server's lock queue, so it is granted
 * the moment the leader's transaction ends — not at its next try. The waiters here poll only
 * every 5 s (backoff), far past the bound each hand-off is given: only the queue can meet it.
 */

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

const SLOW_POLL = { initialMs: 5000, maxMs: 5000 };
/** Far below SLOW_POLL: a poll cannot hand off within it, a queued waiter on loopback always does. */
const HANDOFF_BOUND_MS = 2000;

describe('PgElection hand-off on a direct connection', () => {
  it('a waiter queues at the server and leads within the bound after a resign, a close and a dropped connection, with a higher fence each time', async () => {
    const [a, b] = ['a', 'b'].map((id) => new PgElection(pool, 'handoff', { id, ttlMs: 3000, backoff: SLOW_POLL }));
    try {
      const first = await a!.campaign({ timeoutMs: 5000 });
      let next = b!.campaign();
      // Queued at the server: one granted holder and one waiter on the key.
      await pollValue(async () => ((await advisoryLocks(pool)).filter((l) => !l.granted).length === 1 ? true : undefined), 5000);
      await a!.resign();
      expect(await settlesWithin(next, HANDOFF_BOUND_MS)).toBe('resolved');
      const second = await next;
      expect(second.fence).toBeGreaterThan(first.fence);

      next = a!.campaign();
      await pollValue(async () => ((await advisoryLocks(pool)).filter((l) => !l.granted).length === 1 ? true : undefined), 5000);
      await b!.close();
      expect(await settlesWithin(next, HANDOFF_BOUND_MS)).toBe('resolved');
      expect((await next).fence).toBeGreaterThan(second.fence);
    } finally {
      await Promise.all([a!.close(), b!.close()]);
    }
  });

  it('with waitInQueue: false it polls: nothing waits at the server between tries', async () => {
    const [a, b] = ['a', 'b'].map((id) => new PgElection(pool, 'handoff-poll', { id, ttlMs: 3000, waitInQueue: false, backoff: { initialMs: 50, maxMs: 100 } }));
    try {
      await a!.campaign({ timeoutMs: 5000 });
      const next = b!.campaign();
      await new Promise((r) => setTimeout(r, 300));
      expect((await advisoryLocks(pool)).filter((l) => !l.granted)).toEqual([]);
      await a!.resign();
      await next;
    } finally {
      await Promise.all([a!.close(), b!.close()]);
    }
  });
});
