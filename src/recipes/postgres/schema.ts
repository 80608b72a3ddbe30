import type { Pool } from 'pg';
import { ConfigError } from '../../core/errors.js';
import { BoundedMemo } from '../../core/memo.js';
import { optionalNumber, requireOptions } from '../../core/validate.js';
import { connectWithin, pgEndpoint, queryWithin } from './errors.js';
import { DEFAULT_SCHEMA, quoteIdent, quoteLiteral, validateSchema, type PgSchemaOptions } from './ident.js';
import { SCHEMA_LOCK, keyArgs } from './keys.js';

/** tenure's sequence and tables in one schema, as quoted, qualified SQL names. */
export interface TenureTables {
  /** The schema's name, as given. */
  readonly schema: string;
  /** `"schema"` */
  readonly quoted: string;
  /** `"schema".tenure_fence_seq` */
  readonly seq: string;
  /** `"schema".tenure_fence` */
  readonly fence: string;
  /** `"schema".tenure_holder` */
  readonly holder: string;
  /** `nextval('"schema".tenure_fence_seq')`: the next fence. */
  readonly nextval: string;
}

const tablesBySchema = new BoundedMemo<string, TenureTables>();

/** The tables of the `schema` option (validated; undefined: 'public'). */
export function tenureTables(schema: unknown): TenureTables {
  const name = validateSchema('schema', schema);
  let t = tablesBySchema.get(name);
  if (!t) {
    const quoted = quoteIdent('schema', name);
    const seq = `${quoted}.tenure_fence_seq`;
    t = tablesBySchema.set(name, Object.freeze({ schema: name, quoted, seq, fence: `${quoted}.tenure_fence`, holder: `${quoted}.tenure_holder`, nextval: `nextval(${quoteLiteral(seq)})` }));
  }
  return t;
}

/** The sequence and tables, without the schema itself. */
function tablesSql(t: TenureTables): string {
  return `
CREATE SEQUENCE IF NOT EXISTS ${t.seq} AS bigint;
CREATE TABLE IF NOT EXISTS ${t.fence} (
  resource text PRIMARY KEY,
  fence bigint NOT NULL CHECK (fence >= 0)
);
CREATE UNLOGGED TABLE IF NOT EXISTS ${t.holder} (
  name text NOT NULL,
  pid integer NOT NULL,
  holder_id text NOT NULL,
  PRIMARY KEY (name, pid)
);`;
}

/**
 * tenure's schema in `options.schema` (default 'public'), created idempotently on first use, or
 * run this once as a migration (as the schema's owner: a role of the application need not
 * CREATE). Every name is schema-qualified: what tenure touches never depends on a connection's
 * `search_path`.
 * - The schema itself, unless it is 'public' (a new schema grants nothing to other roles).
 * - `tenure_fence_seq`: where lock fences come from. A sequence, not a per-name counter row,
 *   on purpose: `nextval` never rolls back, so a fence handed to a holder whose transaction later
 *   aborted (its connection was killed while it was paused, say) is never handed out again, and a
 *   zombie can never share a fence with its successor — short of a server crash: `nextval` logs
 *   32 values ahead but flushes that WAL record only with a commit (its own or any later one), so
 *   a crash before the flush can hand the successor a fence the crashed holder already had
 *   (Postgres's docs: commit a sequence value before using it outside the database; nothing
 *   cheaper than `nextval` is safer, see bench/RESULTS.md). Fences are strictly increasing in
 *   acquisition order for every name in one schema (each is taken after the lock is granted), not
 *   dense; two schemas count apart.
 * - `tenure_fence`: the highest fence each PostgresFencedResource has accepted.
 * - `tenure_holder`: the id of each session-lock participant, per (name, backend pid), written
 *   before it takes the lock (see holder.ts). A row is only a claim: `holder()` believes it only
 *   while that backend holds the lock and its fence marks (pg_locks), so a gone holder's row is
 *   never reported. Unlogged: it needs no WAL, and after a crash the locks it describes are gone too.
 */
export function SCHEMA_SQL(options?: PgSchemaOptions): string {
  const t = tenureTables(requireOptions('options', options, { schema: true }).schema);
  return (t.schema === DEFAULT_SCHEMA ? '' : `\nCREATE SCHEMA IF NOT EXISTS ${t.quoted};`) + tablesSql(t);
}

/**
 * The least privileges of every Postgres recipe and PostgresFencedResource in `options.schema`,
 * for `role` (spelled as in `pg_roles`; quoted, so 'App-Role' is that role and 'x; SELECT 1' a
 * role of that name, never a second statement): run `SCHEMA_SQL` once as the owner, then this.
 * USAGE on the schema; nextval on the fence sequence; read/insert/update of the fence table;
 * read/insert/update/delete of the holder table (a participant drops the rows of backends that
 * are gone). Advisory locks and cancelling one's own abandoned waits (the protocol's
 * CancelRequest) need no grant — and cannot be denied to anyone (see keys.ts). 'public' is
 * refused: `TO "public"` grants to every role, the very thing a schema per application prevents.
 */
export function GRANTS_SQL(role: string, options?: PgSchemaOptions): string {
  const r = quoteIdent('role', role);
  if (role === 'public') throw new ConfigError('role', "'public' grants to every role; name the application's own role");
  const t = tenureTables(requireOptions('options', options, { schema: true }).schema);
  return `
GRANT USAGE ON SCHEMA ${t.quoted} TO ${r};
GRANT USAGE ON SEQUENCE ${t.seq} TO ${r};
GRANT SELECT, INSERT, UPDATE ON ${t.fence} TO ${r};
GRANT SELECT, INSERT, UPDATE, DELETE ON ${t.holder} TO ${r};`;
}

/** Per pool, the schemas whose creation is under way or done. */
const ready = new WeakMap<Pool, Map<string, Promise<void>>>();
/** Per pool, the schemas known to exist (ensureSchema succeeded once). */
const created = new WeakMap<Pool, Set<string>>();

/** Options of {@link ensureSchema}. */
export interface EnsureSchemaOptions extends PgSchemaOptions {
  /** Bound in ms on taking a connection and on the schema statements. @default 10000 */
  callTimeoutMs?: number;
}

/**
 * Creates tenure's schema (`options.schema`, default 'public') once per pool and schema, each
 * phase within `callTimeoutMs` (default 10 s). Concurrent `CREATE … IF NOT EXISTS` can still
 * collide in the catalog, so creation runs under a reserved advisory lock. A role without USAGE on
 * the schema gets PermissionDeniedError.
 */
export function ensureSchema(pool: Pool, options?: EnsureSchemaOptions): Promise<void> {
  let ms: number;
  let t: TenureTables;
  try {
    const o = requireOptions('options', options, { callTimeoutMs: true, schema: true });
    ms = optionalNumber('callTimeoutMs', o.callTimeoutMs, 10_000, { integer: true, min: 1, max: 2 ** 31 - 1 });
    t = tenureTables(o.schema);
  } catch (e) {
    return Promise.reject(e); // a promise-returning function never throws
  }
  let pending = ready.get(pool);
  if (!pending) ready.set(pool, (pending = new Map()));
  let p = pending.get(t.schema);
  if (!p) {
    const schemas = pending;
    p = (async () => {
      const client = await connectWithin(pool, ms, 'ensureSchema');
      let returned = false;
      const giveBack = (err?: Error | boolean): void => {
        if (returned) return;
        returned = true;
        client.release(err);
      };
      const done = (): void => {
        giveBack();
        let known = created.get(pool);
        if (!known) created.set(pool, (known = new Set()));
        known.add(t.schema);
      };
      try {
        // A role without CREATE (on the database for a schema, on the schema for tables: PG 15's
        // default for public) may still use what an owner made, but `CREATE … IF NOT EXISTS`
        // checks that privilege before existence: look first, create only what is missing.
        const have = await queryWithin(
          client.query(
            `SELECT to_regnamespace(${quoteLiteral(t.quoted)}) IS NOT NULL AS schema,
              to_regclass(${quoteLiteral(t.seq)}) IS NOT NULL AND to_regclass(${quoteLiteral(t.fence)}) IS NOT NULL AND to_regclass(${quoteLiteral(t.holder)}) IS NOT NULL AS ok`,
          ),
          ms,
          'ensureSchema',
          pgEndpoint(pool),
          () => giveBack(true),
        );
        const row = have.rows[0] as { schema?: boolean; ok?: boolean } | undefined;
        if (row?.ok === true) return done();
        const make = row?.schema === true ? tablesSql(t) : SCHEMA_SQL({ schema: t.schema });
        await queryWithin(client.query(`BEGIN; SELECT pg_advisory_xact_lock(${keyArgs(SCHEMA_LOCK)}); ${make} COMMIT;`), ms, 'ensureSchema', pgEndpoint(pool), () => giveBack(true));
        done();
      } catch (e) {
        giveBack(e instanceof Error ? e : true);
        throw e;
      }
    })();
    schemas.set(t.schema, p);
    p.catch(() => schemas.delete(t.schema));
  }
  return p;
}

/**
 * The recipes' way to ensure the schema: what to wait for, or undefined once this pool's schema is
 * known to exist — every lock cycle passes here, and awaiting a settled promise through a signal
 * race each time is work for nothing.
 */
export function schemaPending(pool: Pool, tables: TenureTables, callTimeoutMs: number): Promise<void> | undefined {
  return created.get(pool)?.has(tables.schema) ? undefined : ensureSchema(pool, { callTimeoutMs, schema: tables.schema });
}
