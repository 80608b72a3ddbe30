import { requireString } from '../../core/validate.js';

/** The Redis keys and channel of one lock name. */
export interface LockKeys {
  /** Holds the holder's token, always with a TTL. */
  readonly lock: string;
  /** The name's fence counter (no TTL). */
  readonly fence: string;
  /** The name's epoch marker: replication id and guard start (see scripts.ts). */
  readonly boot: string;
  /** Pub/sub channel the releaser publishes to. */
  readonly released: string;
  /** Pub/sub channel a grant is announced on (for observers). */
  readonly acquired: string;
  /**
   * Pub/sub channel a grant is announced on when the grant before it ended without its holder's
   * release (expired, deleted from outside, lost with the data): that holder may still think it
   * holds, and hears here that it does not. Holders listen here, not on `acquired`, so a holder
   * is not sent every grant of its own (a clean hand-off or its own next grant).
   */
  readonly lost: string;
  /** Waiters in arrival order (sorted set: ticket → token). */
  readonly queue: string;
  /** When each waiter stops counting as alive (sorted set: server ms → token). */
  readonly alive: string;
  /** The queue's ticket counter. */
  readonly ticket: string;
  /** ACQUIRE's keys, in its order (made once per lock, not per attempt). */
  readonly acquireKeys: readonly string[];
  /** RELEASE's keys, in its order. */
  readonly releaseKeys: readonly string[];
}

/** A lock name: 1–200 characters, no control characters, no braces (used as hash tags). */
export function validateLockName(field: string, name: unknown): string {
  return requireString(field, name, {
    maxLength: 200,
    // eslint-disable-next-line no-control-regex
    pattern: /^[^\u0000-\u001f\u007f{}]+$/,
    patternHint: 'contain no control characters and no braces',
  });
}

/** A key prefix: up to 100 characters, no control characters, no braces. May be empty. */
export function validatePrefix(field: string, prefix: unknown): string {
  if (prefix === '') return '';
  return requireString(field, prefix, {
    maxLength: 100,
    // eslint-disable-next-line no-control-regex
    pattern: /^[^\u0000-\u001f\u007f{}]+$/,
    patternHint: 'contain no control characters and no braces',
  });
}

/**
 * Keys for `name` under `prefix`. The name is a hash tag in every key, the epoch marker
 * included, so all the keys one script touches share a Redis Cluster slot (a marker shared by
 * the prefix made every acquire fail with CROSSSLOT on a cluster).
 */
export function lockKeys(prefix: string, name: string): LockKeys {
  const lock = `${prefix}lock:{${name}}`;
  const fence = `${prefix}fence:{${name}}`;
  const boot = `${prefix}epoch:{${name}}`;
  const queue = `${prefix}queue:{${name}}`;
  const alive = `${prefix}alive:{${name}}`;
  const ticket = `${prefix}ticket:{${name}}`;
  return {
    lock,
    fence,
    boot,
    released: `${prefix}released:{${name}}`,
    acquired: `${prefix}acquired:{${name}}`,
    lost: `${prefix}lost:{${name}}`,
    queue,
    alive,
    ticket,
    acquireKeys: [lock, fence, boot, queue, alive, ticket],
    releaseKeys: [lock, queue, boot],
  };
}
