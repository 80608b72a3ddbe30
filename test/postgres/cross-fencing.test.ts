import type { Redis } from 'ioredis';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InMemoryFencedResource, StaleFenceError } from '../../src/index.js';
import { PgSessionLock, PostgresFencedResource, withXactLock } from '../../src/recipes/postgres/index.js';
import { RedisFencedResource, RedisLock } from '../../src/recipes/redis/index.js';
import { PostgresServer, RedisServer } from '../../src/testing/index.js';
import { client } from '../redis/helpers.js';
import { makePool } from './helpers.js';

/**
 * Every lock's fences work with every fenced resource: A holds (fence a), its lease ends, B holds
 * (fence b > a) and writes; A's late write with a is refused and B's data stays. (The process-level
 * versions, with A SIGSTOPped past its TTL, are in test/redis/faults.test.ts and
 * test/postgres/faults.test.ts.)
 */
let redisServer: RedisServer;
let pgServer: PostgresServer;
let redis: Redis;
let pool: pg.Pool;

beforeAll(async () => {
  [redisServer, pgServer] = await Promise.all([new RedisServer().start(), new PostgresServer().start()]);
  redis = client(redisServer.port);
  pool = makePool({ ...pgServer.connectionConfig, max: 6 });
  await pool.query('CREATE TABLE cross_data (k text PRIMARY KEY, v text NOT NULL)');
});

afterAll(async () => {
  redis?.disconnect();
  await pool?.end();
  await Promise.all([redisServer?.stop(), pgServer?.stop()]);
});

type Term = () => Promise<bigint>; // takes the lock, ends the term, returns its fence
const locks: Record<string, (name: string) => Term> = {
  RedisLock: (name) => async () => {
    const lock = new RedisLock(redis, name, { restartGuardMs: 0 });
    const lease = await lock.acquire();
    await lock.close();
    expect(lease.signal.aborted).toBe(true);
    return lease.fence;
  },
  PgSessionLock: (name) => async () => {
    const lease = await new PgSessionLock(pool, name).acquire();
    await lease.release();
    return lease.fence;
  },
  withXactLock: (name) => () => withXactLock(pool, name, ({ fence }) => fence),
};

type Resource = { write(fence: bigint, v: string): Promise<unknown>; read(): Promise<string | undefined> };
const resources: Record<string, (name: string) => Resource> = {
  InMemoryFencedResource: () => {
    const r = new InMemoryFencedResource('cross');
    let value: string | undefined;
    return { write: (f, v) => r.write(f, () => void (value = v)), read: async () => value };
  },
  RedisFencedResource: (name) => {
    const r = new RedisFencedResource(redis, `${name}:fence`);
    return { write: (f, v) => r.write(f, (w) => w.set(`${name}:data`, v)), read: async () => (await redis.get(`${name}:data`)) ?? undefined };
  },
  PostgresFencedResource: (name) => {
    const r = new PostgresFencedResource(pool, name);
    return {
      write: (f, v) => r.write(f, (tx) => tx.query('INSERT INTO cross_data (k, v) VALUES ($1, $2) ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v', [name, v])),
      read: async () => (await pool.query('SELECT v FROM cross_data WHERE k = $1', [name])).rows[0]?.v as string | undefined,
    };
  },
};

describe('fences from every lock are honoured by every fenced resource', () => {
  for (const [lockName, lock] of Object.entries(locks)) {
    for (const [resourceName, resource] of Object.entries(resources)) {
      it(`${lockName} × ${resourceName}: the earlier holder's late write is refused and the later holder's data stays`, async () => {
        const name = `${lockName}-${resourceName}`;
        const term = lock(name);
        const r = resource(name);
        const a = await term();
        const b = await term();
        expect(b).toBeGreaterThan(a);
        await r.write(b, 'B');
        await expect(r.write(a, 'A')).rejects.toBeInstanceOf(StaleFenceError);
        expect(await r.read()).toBe('B');
      });
    }
  }
});
