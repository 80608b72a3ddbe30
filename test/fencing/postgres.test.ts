import pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { ConfigError, StaleFenceError } from '../../src/index.js';
import { PostgresFencedResource } from '../../src/recipes/postgres/index.js';
import { PostgresServer } from '../../src/testing/index.js';
import { fencedResourceContract } from './contract.js';

let server: PostgresServer;
let pool: pg.Pool;
let n = 0;

beforeAll(async () => {
  server = await new PostgresServer().start();
  pool = new pg.Pool({ ...server.connectionConfig, max: 10 });
  pool.on('error', () => undefined); // idle clients see the server's shutdown at teardown
  await pool.query('CREATE TABLE contract_data (k text PRIMARY KEY, v text NOT NULL)');
});

afterAll(async () => {
  await pool?.end();
  await server?.stop();
});

const put = (tx: pg.PoolClient, k: string, v: string) =>
  tx.query('INSERT INTO contract_data (k, v) VALUES ($1, $2) ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v', [k, v]);

fencedResourceContract('PostgresFencedResource', async () => {
  const name = `contract-${++n}`;
  const resource = new PostgresFencedResource(pool, name);
  return {
    resource,
    write: (fence, v) => resource.write(fence, (tx) => put(tx, name, v)),
    failingWrite: (fence) =>
      resource.write(fence, async (tx) => {
        await put(tx, name, 'never');
        throw new Error('body failed');
      }),
    read: async () => ((await pool.query('SELECT v FROM contract_data WHERE k = $1', [name])).rows[0]?.v as string | undefined),
  };
});

it('never runs the write function for a stale fence', async () => {
  const r = new PostgresFencedResource(pool, 'no-run');
  await r.write(5n, () => undefined);
  let ran = false;
  await expect(r.write(4n, () => void (ran = true))).rejects.toBeInstanceOf(StaleFenceError);
  expect(ran).toBe(false);
});

it('keeps fences up to 2^63 − 1 exactly', async () => {
  const r = new PostgresFencedResource(pool, 'big');
  const f = 2n ** 63n - 1n;
  await r.write(f, () => undefined);
  expect(await r.highestFence()).toBe(f);
});

it('refuses a missing pool or an empty resource name with ConfigError', () => {
  expect(() => new PostgresFencedResource(pool, '')).toThrow(ConfigError);
  expect(() => new PostgresFencedResource({} as pg.Pool, 'x')).toThrow(/^pool:/);
});

it('a writer stalled inside its write (its function waits; as a paused process would) loses its session after idleTimeoutMs, so the next writer is not blocked behind its row lock', async () => {
  const name = `stalled-${++n}`;
  const stalled = new PostgresFencedResource(pool, name, { idleTimeoutMs: 500 });
  const next = new PostgresFencedResource(pool, name); // waits up to its callTimeoutMs (5 s) per statement
  let entered!: () => void;
  const inside = new Promise<void>((r) => (entered = r));
  let wake!: () => void;
  const woken = new Promise<void>((r) => (wake = r));
  const first = stalled.write(1n, async (tx) => {
    await put(tx, name, 'stalled');
    entered();
    await woken; // idle in transaction, holding the resource's row lock
  });
  first.catch(() => undefined);
  await inside;
  await next.write(2n, (tx) => put(tx, name, 'next')); // rejects (StoreUnavailableError) if it waits out the stalled writer
  wake();
  await expect(first).rejects.toThrow(); // its session was ended: nothing of it committed
  expect((await pool.query('SELECT v FROM contract_data WHERE k = $1', [name])).rows[0]?.v).toBe('next');
  expect(await next.highestFence()).toBe(2n);
});
