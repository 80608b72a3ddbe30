import { pollValue } from '../helpers/wait.js';
import { Redis } from 'ioredis';
import { RedisLock } from '../../src/recipes/redis/index.js';

/** Timing constants for the Redis suites, in one place. */
export const T = {
  /** Short lease for fault tests: long enough for a loaded 2-core machine's timers. */
  ttlMs: 2000,
  marginMs: 500,
} as const;

export function client(port: number, extra: Record<string, unknown> = {}): Redis {
  return new Redis({ host: '127.0.0.1', port, lazyConnect: false, ...extra });
}

/**
 * The first acquire under a prefix on a just-started server waits out the rest of the restart
 * guard (a new server looks like a restarted one). Pay it once per suite, with the guard the
 * suite's locks use.
 */
export async function warmPrefix(redis: Redis, prefix: string, guardMs: number): Promise<void> {
  const lock = new RedisLock(redis, 'warm-up', { keyPrefix: prefix, ttlMs: guardMs, restartGuardMs: guardMs });
  const lease = await lock.acquire({ timeoutMs: guardMs + 15_000 });
  await lease.release();
  await lock.close();
}

/** Polls `fn` until it returns a value (not undefined) or `timeoutMs` passes (every 10 ms). */
export const eventually = <V>(fn: () => Promise<V | undefined>, timeoutMs = 15_000, everyMs = 10): Promise<V> => pollValue(fn, timeoutMs, everyMs);

/**
 * Backdates the epoch markers of `names` under `prefix` by an hour: their datasets look
 * long-seen on this replication history, so the restart guard does not hold (tests of other
 * behaviour need not sit it out). The restart test kills the server, which removes them for real.
 */
export async function backdateBoot(redis: Redis, prefix: string, ...names: string[]): Promise<void> {
  const [sec, usec] = await redis.time();
  const us = BigInt(sec ?? 0) * 1_000_000n + BigInt(usec ?? 0) - 3_600_000_000n;
  const replid = /master_replid:(\w+)/.exec(await redis.info('replication'))?.[1] ?? '';
  for (const name of names) await redis.hset(`${prefix}epoch:{${name}}`, 'replid', replid, 'since', us.toString());
}

export const fixture = (name: string): string => new URL(`./fixtures/${name}`, import.meta.url).pathname;
