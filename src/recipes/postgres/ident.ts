import { ConfigError } from '../../core/errors.js';
import { requireString } from '../../core/validate.js';

/**
 * SQL identifiers and literals built from user text (a schema, a role): quoted, never pasted, and
 * refused where the server would silently change their meaning. A multi-statement query takes no
 * parameters, so what tenure inlines must be quoted here.
 */

/** Options of everything that keeps state in tenure's sequence and tables. */
export interface PgSchemaOptions {
  /**
   * The schema that holds tenure's fence sequence and tables (see SCHEMA_SQL), spelled as in the
   * catalog (it is quoted: 'Billing' is not 'billing'). Applications sharing a database each get
   * their own, with their own role and GRANTS_SQL, so one application's role cannot read or change
   * another's fences and holders. It is part of every advisory key too: the same lock name in two
   * schemas is two locks, each with its own fence sequence. Use one schema for a lock and the
   * resources it fences. @default 'public'
   */
  schema?: string;
}

/** The schema used when none is given: today's tables, keys and fences, unchanged. */
export const DEFAULT_SCHEMA = 'public';

/** Postgres' identifier limit (NAMEDATALEN − 1 bytes). The server truncates a longer name with a mere NOTICE: two names would become one. */
const MAX_IDENT_BYTES = 63;

/** `name` as a quoted identifier (double quotes doubled), after checking it is one the server keeps as given. */
export function quoteIdent(field: string, name: unknown): string {
  // eslint-disable-next-line no-control-regex
  const s = requireString(field, name, { pattern: /^[^\u0000]+$/, patternHint: 'contain no NUL character' });
  const bytes = Buffer.byteLength(s, 'utf8');
  if (bytes > MAX_IDENT_BYTES) {
    throw new ConfigError(field, `must be at most ${MAX_IDENT_BYTES} bytes in UTF-8 (Postgres truncates longer identifiers, so two names could become one), got ${bytes}`);
  }
  return `"${s.replace(/"/g, '""')}"`;
}

/** `s` as a string literal, as pg's escapeLiteral writes it (quotes doubled; with a backslash, an E'' literal with it doubled). */
export function quoteLiteral(s: string): string {
  const body = s.replace(/'/g, "''");
  return s.includes('\\') ? ` E'${body.replace(/\\/g, '\\\\')}'` : `'${body}'`;
}

/**
 * A schema name for the `schema` option (undefined: 'public'). `pg_`-prefixed names are refused:
 * Postgres reserves them, and one of them is a trap — `pg_temp` names each session's own temporary
 * schema, so every connection would see its own fences.
 */
export function validateSchema(field: string, schema: unknown): string {
  if (schema === undefined) return DEFAULT_SCHEMA;
  quoteIdent(field, schema);
  const s = schema as string;
  if (s.startsWith('pg_')) throw new ConfigError(field, `'pg_' names are reserved by Postgres for system schemas (pg_temp is each session's own), got ${JSON.stringify(s)}`);
  return s;
}
