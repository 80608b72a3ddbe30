import type { History } from './types.js';

/** The fields that hold CLOCK_MONOTONIC stamps or fences: bigints, kept exact as decimal strings. */
const BIGINT_FIELDS = new Set(['t', 'fence', 'deadline']);

/** A history (or anything holding one) as JSON; bigints become decimal strings. */
export function historyToJSON(value: unknown, space?: number): string {
  return JSON.stringify(value, (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v), space);
}

/** Reads what {@link historyToJSON} wrote, turning `t`, `fence` and `deadline` back into bigints. */
export function historyFromJSON<T = History>(text: string): T {
  return JSON.parse(text, (k, v: unknown) => (BIGINT_FIELDS.has(k) && typeof v === 'string' && /^-?\d+$/.test(v) ? BigInt(v) : v)) as T;
}
