import { randomUUID } from 'node:crypto';
import type { LeaderInfo } from '../../core/candidate.js';

/**
 * What a Redis lock key holds: `<token>:<fence>:<id>` (written by the acquire script). The token
 * makes renew and release owner-checked; fence and id tell anyone who holds with one GET.
 */

/**
 * A fresh owner token: a random UUID (122 random bits; Node draws them from a pooled buffer of
 * its own, so this costs no syscall per token).
 */
export function newToken(): string {
  return randomUUID();
}

/** The lock key's value while held. */
export function lockValue(token: string, fence: bigint, id: string): string {
  return `${token}:${fence}:${id}`;
}

/** `<token>:<fence>:<id>` → the holder; undefined for no value. */
export function parseHolder(value: string | null): LeaderInfo | undefined {
  if (value === null) return undefined;
  const a = value.indexOf(':');
  const b = value.indexOf(':', a + 1);
  if (a < 0 || b < 0) return undefined;
  return { id: value.slice(b + 1), fence: BigInt(value.slice(a + 1, b)) };
}

