import { createHash } from 'node:crypto';
import { afterAll, beforeAll, expect, it } from 'vitest';
import pg from 'pg';
import { ConfigError, PermissionDeniedError } from '../../src/index.js';
import { DEFAULT_NAMESPACE, GRANTS_SQL, PgSessionLock, PostgresFencedResource, SCHEMA_SQL, advisoryKey, ensureSchema, tryWithXactLock, withXactLock } from '../../src/recipes/postgres/index.js';
import { PostgresServer } from '../../src/testing/index.js';
import { makePool } from '../postgres/helpers.js';

/**
 * Two applications in one database, as the README's production section sets them up: each has its
 * own login role and its own schema, made by the owner with SCHEMA_SQL and granted with GRANTS_SQL.
 * The names are ones that must be quoted: a role with upper case and a dash, a role whose name is
 * SQL, a schema with a quote, a double quote, a space and a backslash.
 */
const ROLE_A = 'App-Role';
const ROLE_B = 'x; SELECT 1';
const SCHEMA_A = 'app_a';
const SCHEMA_B = `b's "schema"\\`;
const MAX = 2n ** 63n - 1n;

let postgres: PostgresServer;
let admin: pg.Client;
const pools: pg.Pool[] = [];
const poolOf = (user: string): pg.Pool => {
  const p = makePool({ ...postgres.connectionConfig, user, max: 4 });
  pools.push(p);
  return p;
};
const sqlstate = (q: Promise<unknown>): Promise<unknown> => q.then(() => 'accepted', (e: { code?: unknown }) => e.code);

beforeAll(async () => {
  postgres = await new PostgresServer().start();
  admin = new pg.Client(postgres.connectionConfig);
  await admin.connect();
  await admin.query(`CREATE ROLE "App-Role" LOGIN; CREATE ROLE "x; SELECT 1" LOGIN; CREATE ROLE nogrant LOGIN`);
  for (const [role, schema] of [
    [ROLE_A, SCHEMA_A],
    [ROLE_B, SCHEMA_B],
  ] as const) {
    await admin.query(SCHEMA_SQL({ schema }));
    await admin.query(GRANTS_SQL(role, { schema }));
  }
});
afterAll(async () => {
  await Promise.all(pools.map((p) => p.end().catch(() => undefined)));
  await admin?.end().catch(() => undefined);
  await postgres?.stop();
});

it('GRANTS_SQL quotes the role it is given: App-Role is that role, "x; SELECT 1" a role of that name and never a second statement', async () => {
  const grants = (await admin.query(GRANTS_SQL(ROLE_B, { schema: SCHEMA_B }))) as unknown as pg.QueryResult[];
  expect(grants.map((r) => r.command)).toEqual(['GRANT', 'GRANT', 'GRANT', 'GRANT']);
  const priv = async (role: string, schema: string): Promise<boolean[]> => {
    const seq = `"${schema.replace(/"/g, '""')}".tenure_fence_seq`;
    const r = await admin.query<{ s: boolean; f: boolean; h: boolean }>(
      `SELECT has_sequence_privilege($1, $2, 'USAGE') AS s, has_table_privilege($1, replace($2, 'tenure_fence_seq', 'tenure_fence'), 'UPDATE') AS f,
        has_table_privilege($1, replace($2, 'tenure_fence_seq', 'tenure_holder'), 'DELETE') AS h`,
      [role, seq],
    );
    return [r.rows[0]!.s, r.rows[0]!.f, r.rows[0]!.h];
  };
  expect(await priv(ROLE_A, SCHEMA_A)).toEqual([true, true, true]);
  expect(await priv(ROLE_B, SCHEMA_B)).toEqual([true, true, true]);
  expect(await priv(ROLE_B, SCHEMA_A)).toEqual([false, false, false]);
  expect(await priv(ROLE_A, SCHEMA_B)).toEqual([false, false, false]);
  // Each works in its own schema as the plain role it is.
  for (const [role, schema] of [
    [ROLE_A, SCHEMA_A],
    [ROLE_B, SCHEMA_B],
  ] as const) {
    const pool = poolOf(role);
    const ledger = new PostgresFencedResource(pool, 'ledger', { schema });
    const fence = await withXactLock(pool, 'setup', (ctx) => ledger.write(ctx.fence, () => ctx.fence, { client: ctx.client }), { schema });
    expect(await ledger.highestFence()).toBe(fence);
  }
  // What the server could not keep as given is refused before it is sent.
  for (const [make, field] of [
    [() => GRANTS_SQL('public'), 'role'], // TO "public" is every role
    [() => GRANTS_SQL('r'.repeat(64)), 'role'], // truncated to 63 bytes: another role
    [() => GRANTS_SQL('a\u0000b'), 'role'],
    [() => SCHEMA_SQL({ schema: 'pg_temp' }), 'schema'], // each session's own: fences not shared
    [() => GRANTS_SQL(ROLE_A, { schema: 's'.repeat(64) }), 'schema'],
  ] as const) {
    expect(make).toThrow(ConfigError);
    expect(() => make()).toThrow(expect.objectContaining({ field }));
  }
});

it("a role of one application cannot change, delete or draw from another application's fences and holder rows", async () => {
  const a = poolOf(ROLE_A);
  const b = poolOf(ROLE_B);
  const lock = new PgSessionLock(a, 'job', { schema: SCHEMA_A, id: 'a-1' });
  const lease = await lock.acquire();
  const ledger = new PostgresFencedResource(a, 'ledger', { schema: SCHEMA_A });
  await ledger.write(lease.fence, () => undefined);
  try {
    // B's own SQL, straight at A's tables and sequence: the schema itself is closed to it.
    for (const q of [
      `UPDATE ${SCHEMA_A}.tenure_fence SET fence = ${MAX}`,
      `INSERT INTO ${SCHEMA_A}.tenure_fence VALUES ('ledger', ${MAX}) ON CONFLICT (resource) DO UPDATE SET fence = EXCLUDED.fence`,
      `DELETE FROM ${SCHEMA_A}.tenure_holder`,
      `UPDATE ${SCHEMA_A}.tenure_holder SET holder_id = 'b'`,
      `SELECT nextval('${SCHEMA_A}.tenure_fence_seq')`,
      `SELECT * FROM ${SCHEMA_A}.tenure_fence`,
    ]) {
      expect([q, await sqlstate(b.query(q))]).toEqual([q, '42501']);
    }
    // B through tenure, pointed at A's schema: typed refusals, nothing written.
    const denied = [
      new PostgresFencedResource(b, 'ledger', { schema: SCHEMA_A }).write(MAX, () => undefined),
      new PostgresFencedResource(b, 'ledger', { schema: SCHEMA_A }).highestFence(),
      withXactLock(b, 'job', () => undefined, { schema: SCHEMA_A }),
      new PgSessionLock(b, 'job', { schema: SCHEMA_A }).tryAcquire(),
      new PgSessionLock(b, 'job', { schema: SCHEMA_A }).holder(),
    ];
    for (const d of await Promise.allSettled(denied)) {
      expect(d.status).toBe('rejected');
      expect((d as PromiseRejectedResult).reason).toBeInstanceOf(PermissionDeniedError);
    }
    // A's fence, holder row and lock are as they were.
    expect(await ledger.highestFence()).toBe(lease.fence);
    expect(await lock.holder()).toEqual({ id: 'a-1', fence: lease.fence });
    expect((await admin.query(`SELECT holder_id FROM ${SCHEMA_A}.tenure_holder WHERE name = 'job'`)).rows).toEqual([{ holder_id: 'a-1' }]);
    await expect(ledger.write(lease.fence, () => 'still accepted')).resolves.toBe('still accepted');
    expect(lease.signal.aborted).toBe(false);
  } finally {
    await lease.release();
  }
});

it('the same lock name in two schemas is two locks with their own fences, and the default schema keeps its keys', async () => {
  const a = poolOf(ROLE_A);
  const b = poolOf(ROLE_B);
  const sha = (text: string): number => createHash('sha256').update(text, 'utf8').digest().readInt32BE(0);
  // 'public' hashes the name alone, as before schemas existed (other processes and the CLI meet there).
  expect(advisoryKey('job')).toEqual({ namespace: DEFAULT_NAMESPACE, key: sha('job') });
  expect(advisoryKey('job', { schema: 'public' })).toEqual(advisoryKey('job'));
  expect(advisoryKey('job', { schema: SCHEMA_A })).toEqual({ namespace: DEFAULT_NAMESPACE, key: sha(`${SCHEMA_A}\u0000job`) });
  expect(new PgSessionLock(a, 'job', { schema: SCHEMA_A }).key).toEqual(advisoryKey('job', { schema: SCHEMA_A }));

  const seen = await withXactLock(
    a,
    'job',
    async (held) => {
      // A second take in A's schema is refused, B's own 'job' is free: no contention across applications.
      const again = await tryWithXactLock(a, 'job', () => 'taken', { schema: SCHEMA_A });
      const other = await tryWithXactLock(b, 'job', (ctx) => ctx.fence, { schema: SCHEMA_B });
      const session = new PgSessionLock(b, 'job', { schema: SCHEMA_B, id: 'b-1' });
      const lease = await session.tryAcquire();
      const holder = await session.holder();
      await lease?.release();
      return { held: held.fence, again, other, lease: lease?.fence, holder };
    },
    { schema: SCHEMA_A },
  );
  expect(seen.again).toEqual({ acquired: false });
  expect(seen.other.acquired).toBe(true);
  expect(seen.lease).toBeDefined();
  expect(seen.holder).toEqual({ id: 'b-1', fence: seen.lease });
  // Fences rise per schema, each from its own sequence.
  const next = await withXactLock(a, 'job', (ctx) => ctx.fence, { schema: SCHEMA_A });
  expect(next).toBeGreaterThan(seen.held);
  const nextB = await withXactLock(b, 'job', (ctx) => ctx.fence, { schema: SCHEMA_B });
  expect(nextB).toBeGreaterThan(seen.lease!);
});

it('ensureSchema makes the tables in a schema the role owns without CREATE on the database, and a new schema for a role that may create one', async () => {
  await admin.query(`CREATE SCHEMA owned AUTHORIZATION "App-Role"`);
  const a = poolOf(ROLE_A);
  expect((await a.query("SELECT has_database_privilege(current_user, current_database(), 'CREATE') AS c")).rows[0]).toEqual({ c: false });
  await ensureSchema(a, { schema: 'owned' });
  expect(await withXactLock(a, 'job', (ctx) => ctx.fence, { schema: 'owned' })).toBe(1n);
  // A role that may not create a schema is told so.
  await expect(ensureSchema(a, { schema: 'not_there' })).rejects.toBeInstanceOf(PermissionDeniedError);
  const su = poolOf('postgres');
  await ensureSchema(su, { schema: 'made_on_use' });
  const r = await admin.query("SELECT relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'made_on_use' AND relkind IN ('S', 'r') ORDER BY relname");
  expect(r.rows.map((x: { relname: string }) => x.relname)).toEqual(['tenure_fence', 'tenure_fence_seq', 'tenure_holder']);
});

it('one connection that holds the same name in two schemas writes its holder row in each', async () => {
  // One client, so each acquire runs on the same backend; holder() is read through another pool.
  const one = makePool({ ...postgres.connectionConfig, max: 1 });
  pools.push(one);
  const reader = poolOf('postgres');
  for (const schema of ['public', 'made_on_use', 'public']) {
    const lease = await new PgSessionLock(one, 'shared-name', { schema, id: 'same-id' }).acquire();
    try {
      expect([schema, await new PgSessionLock(reader, 'shared-name', { schema }).holder()]).toEqual([schema, { id: 'same-id', fence: lease.fence }]);
    } finally {
      await lease.release();
    }
  }
});

it('what a schema cannot protect: any role that can connect takes any advisory key, tenure’s included (hence a database per trust domain)', async () => {
  const a = poolOf(ROLE_A);
  const intruder = new pg.Client({ ...postgres.connectionConfig, user: 'nogrant' });
  await intruder.connect();
  try {
    const k = advisoryKey('job', { schema: SCHEMA_A });
    await intruder.query('SELECT pg_advisory_lock($1, $2)', [k.namespace, k.key]);
    expect(await tryWithXactLock(a, 'job', () => 'ran', { schema: SCHEMA_A })).toEqual({ acquired: false });
    // It shows as a holder without a fence, and it cannot draw one.
    expect(await new PgSessionLock(a, 'job', { schema: SCHEMA_A }).holder()).toEqual({ id: `pid:${(intruder as unknown as { processID: number }).processID}`, fence: undefined });
    expect(await sqlstate(intruder.query(`SELECT nextval('${SCHEMA_A}.tenure_fence_seq')`))).toBe('42501');
    await intruder.query('SELECT pg_advisory_unlock($1, $2)', [k.namespace, k.key]);
    expect(await tryWithXactLock(a, 'job', () => 'ran', { schema: SCHEMA_A })).toEqual({ acquired: true, value: 'ran' });
  } finally {
    await intruder.end();
  }
});
