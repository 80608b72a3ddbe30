import type pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { cancelQuery } from '../../src/recipes/postgres/cancel.js';
import { PostgresServer } from '../../src/testing/index.js';
import { pollValue } from '../helpers/wait.js';
import { makePool } from './helpers.js';

/**
 * What tenure reads of pg's undocumented client fields (src/recipes/postgres/cancel.ts and
 * holder.ts: `processID` and `secretKey` from BackendKeyData, `host` and `port`), checked on the
 * pg version the peer range is pinned to (test/package/peer-ranges.test.ts): a release that
 * renamed them would turn every abandoned wait's cancel into a no-op, silently.
 */
let server: PostgresServer;
let pool: pg.Pool;

beforeAll(async () => {
  server = await new PostgresServer().start();
  pool = makePool({ ...server.connectionConfig, max: 2 });
});
afterAll(async () => {
  await pool?.end();
  await server?.stop();
});

it("a pg client carries its backend's key (processID = pg_backend_pid(), a secretKey) and its endpoint", async () => {
  const client = await pool.connect();
  try {
    const k = client as unknown as { processID: unknown; secretKey: unknown; host: unknown; port: unknown };
    const pid = (await client.query('SELECT pg_backend_pid() AS pid')).rows[0].pid as number;
    expect(k.processID).toBe(pid);
    expect(typeof k.secretKey).toBe('number');
    expect(k.host).toBe(server.connectionConfig.host);
    expect(k.port).toBe(server.port);
  } finally {
    client.release();
  }
});

it("cancelQuery, from those fields, cancels the client's running query on the server", async () => {
  const client = await pool.connect();
  try {
    const running = client.query('SELECT pg_sleep(30)').then(
      () => undefined,
      (e: unknown) => e,
    );
    const pid = (client as unknown as { processID: number }).processID;
    await pollValue(async () => ((await pool.query("SELECT 1 FROM pg_stat_activity WHERE pid = $1 AND query LIKE 'SELECT pg_sleep%' AND state = 'active'", [pid])).rowCount ? true : undefined), 10_000);
    await cancelQuery(client, 2000);
    const error = await running;
    expect((error as { code?: string } | undefined)?.code).toBe('57014'); // query_canceled
  } finally {
    client.release();
  }
});
