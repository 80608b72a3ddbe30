import { afterAll, beforeAll, expect, it } from 'vitest';
import pg from 'pg';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { GRANTS_SQL, PgElection, PgSessionLock, PostgresFencedResource, SCHEMA_SQL, tryWithXactLock, withXactLock } from '../../src/recipes/postgres/index.js';
import { PermissionDeniedError } from '../../src/index.js';
import { PostgresServer, makeCertificates } from '../../src/testing/index.js';
import { postgresUser } from '../../src/testing/postgres.js';
import { makePool } from '../postgres/helpers.js';
import { expectNoSecret } from '../helpers/secrets.js';

/**
 * Postgres with ssl=on, password (SCRAM) logins over TLS only, and a plain role `app` that may
 * not CREATE: the schema is made once by the owner, and `app` gets exactly GRANTS_SQL.
 */
const SECRET = 'app-Pa55-word';
let postgres: PostgresServer;
let ssl: { ca: string; servername: string };
const pools: pg.Pool[] = [];
const appPool = (password = SECRET, user = 'app'): pg.Pool => {
  const p = makePool({ ...postgres.connectionConfig, user, password, ssl, max: 4 });
  pools.push(p);
  return p;
};

beforeAll(async () => {
  const certs = await makeCertificates(postgresUser());
  ssl = { ca: certs.ca, servername: 'localhost' };
  postgres = await new PostgresServer({ ssl: certs, hba: ['hostssl all app,nogrant 127.0.0.1/32 scram-sha-256', 'host all app,nogrant 127.0.0.1/32 reject'] }).start();
  const admin = new pg.Client(postgres.connectionConfig);
  await admin.connect();
  await admin.query(`CREATE ROLE app LOGIN PASSWORD '${SECRET}'; CREATE ROLE nogrant LOGIN PASSWORD 'nogrant-secret';`);
  await admin.query(SCHEMA_SQL());
  await admin.query(GRANTS_SQL('app'));
  await admin.end();
});
afterAll(async () => {
  await Promise.all(pools.map((p) => p.end().catch(() => undefined)));
  await postgres?.stop();
});

it('every Postgres recipe and the fenced resource work over TLS as a plain role with GRANTS_SQL only', async () => {
  const pool = appPool();
  const su = await pool.query<{ su: string; ssl: boolean }>("SELECT current_setting('is_superuser') AS su, ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()");
  expect(su.rows[0]).toEqual({ su: 'off', ssl: true });
  const ledger = new PostgresFencedResource(pool, 'ledger');
  const f1 = await withXactLock(pool, 'job', async (ctx) => {
    await ledger.write(ctx.fence, () => undefined, { client: ctx.client });
    return ctx.fence;
  });
  const r = await tryWithXactLock(pool, 'job', ({ fence }) => fence);
  expect(r.acquired && r.value > f1).toBe(true);
  const lock = new PgSessionLock(pool, 'job', { ttlMs: 1500 });
  const waiter = new PgSessionLock(pool, 'job');
  const lease = await lock.acquire();
  // The abandoned wait is cancelled without pg_cancel_backend (which needs a privilege).
  await expect(waiter.acquire({ timeoutMs: 200 })).rejects.toMatchObject({ code: 'ACQUIRE_TIMEOUT' });
  await ledger.write(lease.fence, () => undefined);
  await lease.release();
  const election = new PgElection(pool, 'leader', { id: 'app-1' });
  const term = await election.campaign();
  expect(term.fence).toBeGreaterThan(lease.fence);
  await election.close();
  expect(await ledger.highestFence()).toBe(lease.fence);
});

it('a role without the grants, and a wrong password, end in PermissionDeniedError that carries no password', async () => {
  const denied = appPool('nogrant-secret', 'nogrant');
  const e1 = await withXactLock(denied, 'job', () => undefined).catch((e: unknown) => e);
  expect(e1).toBeInstanceOf(PermissionDeniedError);
  expect(String(e1)).toMatch(/permission denied.*42501/);
  await expect(new PostgresFencedResource(denied, 'ledger').write(1n, () => undefined)).rejects.toBeInstanceOf(PermissionDeniedError);
  await expect(new PgSessionLock(denied, 'job').tryAcquire()).rejects.toBeInstanceOf(PermissionDeniedError);

  const wrong = 'not-the-Pa55-word';
  const e2 = await withXactLock(appPool(wrong), 'job', () => undefined).catch((e: unknown) => e);
  expect(e2).toBeInstanceOf(PermissionDeniedError);
  const lines: string[] = [];
  const logger = pino({ level: 'debug' }, new Writable({ write: (c: Buffer, _e, cb) => (lines.push(c.toString()), cb()) }));
  const e3 = await new PgSessionLock(appPool(wrong), 'job', { logger }).acquire({ timeoutMs: 5000 }).catch((e: unknown) => e);
  expect(e3).toBeInstanceOf(PermissionDeniedError);
  const ok = new PgElection(appPool(), 'logged', { logger });
  await ok.campaign();
  await ok.close();
  expect(lines.join('\n')).not.toContain(SECRET);
  expect(lines.join('\n')).not.toContain(wrong);
  // A pool built from a connection string with the password in it, as the CLI builds one.
  const url = `postgres://app:${encodeURIComponent(wrong)}@127.0.0.1:${postgres.port}/${postgres.connectionConfig.database}?sslmode=no-verify`;
  const byUrl = makePool({ connectionString: url, ssl, max: 1 });
  pools.push(byUrl);
  const e4 = await withXactLock(byUrl, 'job', () => undefined).catch((e: unknown) => e);
  expect(e4).toBeInstanceOf(PermissionDeniedError);
  for (const e of [e1, e2, e3, e4]) expectNoSecret(e, wrong, SECRET, 'nogrant-secret');
});
