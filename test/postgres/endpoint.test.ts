import { afterAll, expect, it } from 'vitest';
import pg from 'pg';
import { PgSessionLock, PostgresFencedResource, withXactLock } from '../../src/recipes/postgres/index.js';
import { StoreUnavailableError } from '../../src/index.js';
import { freePort } from '../../src/testing/net.js';
import { makePool } from './helpers.js';
import { expectNoSecret } from '../helpers/secrets.js';

const pools: pg.Pool[] = [];
afterAll(() => Promise.all(pools.map((p) => p.end())));

it('a pool built from a connection string names its real host:port in StoreUnavailableError, never its password', async () => {
  const port = await freePort(); // nothing listens there: refused at once
  const pool = makePool({ connectionString: `postgres://app:url-Pa55-word@127.0.0.1:${port}/billing`, connectionTimeoutMillis: 2000 });
  pools.push(pool);
  const errors = [
    await withXactLock(pool, 'job', () => undefined).catch((e: unknown) => e),
    await new PgSessionLock(pool, 'job').tryAcquire().catch((e: unknown) => e),
    await new PostgresFencedResource(pool, 'ledger').write(1n, () => undefined).catch((e: unknown) => e),
  ];
  for (const err of errors) {
    expect(err).toBeInstanceOf(StoreUnavailableError);
    expect((err as StoreUnavailableError).endpoint).toBe(`127.0.0.1:${port}/billing`);
    expect(String(err)).toContain(`postgres at 127.0.0.1:${port}/billing:`);
    expectNoSecret(err, 'url-Pa55-word');
  }
});
