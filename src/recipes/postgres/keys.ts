import { createHash } from 'node:crypto';
import { ConfigError } from '../../core/errors.js';
import { BoundedMemo } from '../../core/memo.js';
import { requireNumber, requireOptions, requireString } from '../../core/validate.js';
import { DEFAULT_SCHEMA, validateSchema, type PgSchemaOptions } from './ident.js';

/**
 * The advisory-lock keyspace. Postgres advisory locks are keyed by one int8 or two int4s; tenure
 * uses the two-int4 form, deliberately: `(namespace, hash(schema, name))`.
 * - `namespace` keeps tenure's locks apart from other users of advisory locks in the same
 *   database (the single-int8 form used by migration tools and `advisory-lock` never collides
 *   with the two-int4 form: Postgres keys them apart).
 * - `hash` is the first 4 bytes of SHA-256, as a signed int4, of the name — in the default schema
 *   'public', so keys are what they were before schemas existed (a process with the `schema`
 *   option unset, another tenure version, the CLI, all meet on them) — or of
 *   `schema + NUL + name` in any other schema (neither may contain NUL, so no two pairs meet), so
 *   the same name in two applications' schemas is two locks.
 *
 * The keyspace is the database's, not a schema's: advisory locks have no privileges, and any role
 * that can connect can take any key, tenure's included (see the README's production section).
 *
 * Collisions: two distinct names in one namespace share a lock with probability ≈ n²/2³³ for n
 * names (≈ 1 in 850 for 10,000 names). A collision never breaks mutual exclusion; it only makes
 * the two names exclude each other (extra waiting), and fences stay strictly increasing per name
 * because they come from one sequence (see schema.ts). One hazard follows: holding one name while
 * acquiring a colliding one from the same process waits on yourself, which Postgres cannot see as
 * a deadlock across two connections — use a timeout when you nest locks.
 */
export interface AdvisoryKey {
  /** The first int4 of the two-key advisory lock: the namespace. */
  readonly namespace: number;
  /** The second int4: the name's hash. */
  readonly key: number;
}

/** 'tenu' as an int4: tenure's default namespace. */
export const DEFAULT_NAMESPACE = 0x74656e75;
/** Reserved for tenure's own schema creation. */
export const SCHEMA_LOCK: AdvisoryKey = Object.freeze({ namespace: 0x74656e76, key: 0 });
/**
 * Reserved for the marks of a session lock's fence (see holder.ts): the holder takes a shared
 * advisory lock `(high, fence >> 32)` and one `(low, fence & 0xffffffff)`.
 */
export const FENCE_MARKS = Object.freeze({ high: 0x74656e77, low: 0x74656e78 });

const RESERVED = new Set([SCHEMA_LOCK.namespace, FENCE_MARKS.high, FENCE_MARKS.low]);

/** A lock name: 1–200 characters, no NUL. */
export function validateName(field: string, name: unknown): string {
  // eslint-disable-next-line no-control-regex
  return requireString(field, name, { maxLength: 200, pattern: /^[^\u0000]+$/, patternHint: 'contain no NUL character' });
}

/** Validates an int4 namespace that is not one of tenure's reserved ones. */
export function validateNamespace(field: string, ns: unknown): number {
  const n = requireNumber(field, ns, { integer: true, min: -(2 ** 31), max: 2 ** 31 - 1 });
  if (RESERVED.has(n)) throw new ConfigError(field, `${n} is reserved by tenure (its schema lock and fence marks); pick another namespace`);
  return n;
}

/** Options of {@link advisoryKey}: those of the lock whose key it is. */
export interface AdvisoryKeyOptions extends PgSchemaOptions {
  /** @default 0x74656e75 ('tenu') */
  namespace?: number;
}

/** The two-int4 key of the lock `name` (validated like the recipes' options). */
export function advisoryKey(name: string, options?: AdvisoryKeyOptions): AdvisoryKey {
  const o = requireOptions('options', options, { namespace: true, schema: true });
  const n = validateName('name', name);
  const namespace = o.namespace === undefined ? DEFAULT_NAMESPACE : validateNamespace('namespace', o.namespace);
  const schema = validateSchema('schema', o.schema);
  const hashedText = schema === DEFAULT_SCHEMA ? n : `${schema}\u0000${n}`;
  let key = hashed.get(hashedText);
  if (key === undefined) {
    key = hashed.set(hashedText, createHash('sha256').update(hashedText, 'utf8').digest().readInt32BE(0));
  }
  return { namespace, key };
}

/** hashed text → its key: a SHA-256 per lock cycle is ~7 µs of a ~150 µs Postgres cycle. */
const hashed = new BoundedMemo<string, number>();

/** `ns, key` for inlining into SQL: both are integers we computed, never user text. */
export function keyArgs(k: AdvisoryKey): string {
  return `${k.namespace | 0}, ${k.key | 0}`;
}
