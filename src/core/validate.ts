import { randomUUID } from 'node:crypto';
import { ConfigError } from './errors.js';
import { unknownOptionMessage } from './option-hints.js';

/**
 * Option validation helpers. Every public constructor validates before anything runs and throws
 * {@link ConfigError} naming the field, one sentence per problem.
 */

function describe(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value);
  if (typeof value === 'bigint') return `${value}n`;
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  return typeof value === 'object' ? 'an object' : String(value);
}

/**
 * The keys of an options type, one `true` per property. Written as a literal against the
 * interface, it is checked both ways by the compiler: a property missing from the list, or a key
 * the interface does not have, does not compile. So the interface is the one list of names.
 */
export type OptionKeys<T> = { readonly [K in keyof T]-?: true };

/**
 * Throws unless `value` is an object that is not an array (or undefined, which becomes `{}`): for
 * objects that are not tenure's options (a driver's options passed through, a map of settings).
 */
export function requireObject<T extends object>(field: string, value: T | undefined): T {
  if (value === undefined) return {} as T;
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new ConfigError(field, `must be an options object, got ${describe(value)}`);
  }
  return value;
}

/**
 * Throws unless `value` is an options object (or undefined, which becomes `{}`) with no key
 * outside `keys`. An unknown key is refused — never a default silently used for a misspelt TTL —
 * with a ConfigError naming it (`ttl`; `backoff.min` when `field` names a nested object rather
 * than a call's own `options`) and saying what was likely meant (`did you mean 'ttlMs'?`).
 */
export function requireOptions<T extends object>(field: string, value: T | undefined, keys: OptionKeys<NoInfer<T>>): T {
  const o = requireObject(field, value);
  for (const key of Object.keys(o)) {
    if (!Object.hasOwn(keys, key)) {
      throw new ConfigError(field === 'options' ? key : `${field}.${key}`, unknownOptionMessage(key, Object.keys(keys)));
    }
  }
  return o;
}

export interface NumberRule {
  min?: number;
  max?: number;
  /** The value must be strictly greater than `min`. */
  exclusiveMin?: boolean;
  integer?: boolean;
}

/** Throws unless `value` is a finite number within the rule. */
export function requireNumber(field: string, value: unknown, rule: NumberRule = {}): number {
  if (typeof value !== 'number' || !Number.isFinite(value)) {
    throw new ConfigError(field, `must be a finite number, got ${describe(value)}`);
  }
  if (rule.integer && !Number.isInteger(value)) throw new ConfigError(field, `must be an integer, got ${value}`);
  if (rule.min !== undefined) {
    if (rule.exclusiveMin ? value <= rule.min : value < rule.min) {
      throw new ConfigError(field, `must be ${rule.exclusiveMin ? 'greater than' : 'at least'} ${rule.min}, got ${value}`);
    }
  }
  if (rule.max !== undefined && value > rule.max) throw new ConfigError(field, `must be at most ${rule.max}, got ${value}`);
  return value;
}

/** Like {@link requireNumber}, but `undefined` yields `fallback`. */
export function optionalNumber(field: string, value: unknown, fallback: number, rule: NumberRule = {}): number {
  return value === undefined ? requireNumber(field, fallback, rule) : requireNumber(field, value, rule);
}

export interface StringRule {
  minLength?: number;
  maxLength?: number;
  pattern?: RegExp;
  /** Said after "must" when the pattern does not match, e.g. "start with '/'". */
  patternHint?: string;
}

/** Throws unless `value` is a string within the rule. */
export function requireString(field: string, value: unknown, rule: StringRule = {}): string {
  if (typeof value !== 'string') throw new ConfigError(field, `must be a string, got ${describe(value)}`);
  const min = rule.minLength ?? 1;
  if (value.length < min) throw new ConfigError(field, min === 1 ? 'must not be empty' : `must be at least ${min} characters`);
  if (rule.maxLength !== undefined && value.length > rule.maxLength) {
    throw new ConfigError(field, `must be at most ${rule.maxLength} characters, got ${value.length}`);
  }
  if (rule.pattern && !rule.pattern.test(value)) {
    throw new ConfigError(field, `must ${rule.patternHint ?? `match ${rule.pattern}`}, got ${describe(value)}`);
  }
  return value;
}

/** Like {@link requireString}, but `undefined` yields `fallback`. */
export function optionalString(field: string, value: unknown, fallback: string, rule: StringRule = {}): string {
  return value === undefined ? fallback : requireString(field, value, rule);
}

/** Throws unless `value` is a boolean; `undefined` yields `fallback`. */
export function optionalBoolean(field: string, value: unknown, fallback: boolean): boolean {
  if (value === undefined) return fallback;
  if (typeof value !== 'boolean') throw new ConfigError(field, `must be true or false, got ${describe(value)}`);
  return value;
}

/** Throws unless `value` is one of `choices`; `undefined` yields `fallback`. */
export function optionalEnum<T extends string>(field: string, value: unknown, choices: readonly T[], fallback: T): T {
  if (value === undefined) return fallback;
  if (typeof value !== 'string' || !(choices as readonly string[]).includes(value)) {
    throw new ConfigError(field, `must be one of ${choices.map((c) => `'${c}'`).join(', ')}, got ${describe(value)}`);
  }
  return value as T;
}

/** Throws unless `value` is an AbortSignal (or undefined). */
export function optionalSignal(field: string, value: unknown): AbortSignal | undefined {
  if (value === undefined) return undefined;
  if (!(value instanceof AbortSignal)) throw new ConfigError(field, `must be an AbortSignal, got ${describe(value)}`);
  return value;
}

/** Throws unless `value` is a function. */
export function requireFunction<T extends (...args: never[]) => unknown>(field: string, value: unknown): T {
  if (typeof value !== 'function') throw new ConfigError(field, `must be a function, got ${describe(value)}`);
  return value as T;
}

/** Longest participant id any backend accepts (ids are stored with every lock and term). */
export const MAX_ID_LENGTH = 256;

/** A participant id: 1–256 characters, no control characters; `undefined` yields a random UUID. */
export function optionalId(value: unknown): string {
  if (value === undefined) return randomUUID();
  // eslint-disable-next-line no-control-regex
  return requireString('id', value, { maxLength: MAX_ID_LENGTH, pattern: /^[^\u0000-\u001f\u007f]+$/, patternHint: 'contain no control characters' });
}
