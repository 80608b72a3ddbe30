import { createHash } from 'node:crypto';
import type { Redis } from 'ioredis';

/**
 * The Lua scripts behind RedisLock. Every state change of a lock key happens inside one of
 * these, so each is atomic on the single Redis node:
 * - acquire: `SET key token NX PX ttl` and `INCR` of the fence counter together, behind the
 *   restart guard;
 * - renew: a token-checked `PEXPIRE`;
 * - release: a token-checked delete that publishes the hand-off.
 *
 * ## Fences across a restart without persistence (the epoch)
 * The fence counter lives in Redis, so a restart without persistence loses it. When the counter
 * is missing, acquire seeds it with the server clock in microseconds (`TIME`) before `INCR`.
 * Before the loss the counter was at most `e0 + n`, where `e0` is the microsecond it was seeded
 * at and `n` the number of acquisitions since. Acquisitions of one name are serialized by these
 * scripts and each takes well over a microsecond of server time, so `n` < the microseconds
 * elapsed, and the new seed (taken later) exceeds every earlier fence. Assumptions, written
 * down: the server's wall clock does not step back across the restart by more than the time
 * the old counter ran ahead of it, and the dataset is lost as a whole (restart, FLUSHALL) — a
 * key evicted alone would break it, so run with `maxmemory-policy noeviction` or a `volatile-*`
 * policy (the counter and the boot marker have no TTL and are never evicted by those).
 *
 * ## The delayed-restart guard
 * The boot marker records the server microsecond at which tenure first saw this dataset. When it
 * is missing, the data was lost (or the server is new: the two cannot be told apart), and a
 * holder elsewhere may still believe in a lease the restart erased. Acquire then grants nothing
 * until `restartGuardMs` (≥ the longest TTL in use) has passed since the marker was written, by
 * which time every such lease has expired on its holder's local deadline too.
 */

/** KEYS: lock, fence counter, boot marker. ARGV: token, ttlMs, restartGuardMs.
 * Returns {1, fence} on success, {0, pttl} when held, {-1, waitMs} while the restart guard holds. */
export const ACQUIRE = `
local t = redis.call('TIME')
local nowUs = tonumber(t[1]) * 1000000 + tonumber(t[2])
local boot = redis.call('GET', KEYS[3])
if not boot then
  redis.call('INCRBY', KEYS[3], string.format('%.0f', nowUs))
  boot = nowUs
else
  boot = tonumber(boot)
end
local waitUs = boot + tonumber(ARGV[3]) * 1000 - nowUs
if waitUs > 0 then
  return {-1, math.ceil(waitUs / 1000)}
end
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  if redis.call('EXISTS', KEYS[2]) == 0 then
    redis.call('INCRBY', KEYS[2], string.format('%.0f', nowUs))
  end
  return {1, redis.call('INCR', KEYS[2])}
end
return {0, redis.call('PTTL', KEYS[1])}
`;

/** KEYS: lock. ARGV: token, ttlMs. Returns 1 when renewed, 0 when the token no longer holds it. */
export const RENEW = `
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
`;

/** KEYS: lock. ARGV: token, release channel. Returns 1 when it deleted its own lock, else 0. */
export const RELEASE = `
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('PUBLISH', ARGV[2], 'released')
  return 1
end
return 0
`;

const shas = new Map<string, string>();

function sha1(src: string): string {
  let s = shas.get(src);
  if (!s) {
    s = createHash('sha1').update(src).digest('hex');
    shas.set(src, s);
  }
  return s;
}

/**
 * Runs a script by its SHA, loading it with EVAL when the server does not know it (first use,
 * or after a restart emptied the script cache). Never mutates the user's client.
 */
export async function runScript(redis: Redis, src: string, keys: string[], args: (string | number)[]): Promise<unknown> {
  try {
    return await redis.evalsha(sha1(src), keys.length, ...keys, ...args);
  } catch (e) {
    if (e instanceof Error && e.message.startsWith('NOSCRIPT')) return redis.eval(src, keys.length, ...keys, ...args);
    throw e;
  }
}
