import { createHash } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { RedisClient } from './client.js';

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
 * ## The delayed-restart guard and the failover guard (one epoch marker per name)
 * Each name has an epoch marker (a hash in the name's slot: `replid`, `since`, `open`). It records the
 * replication history (`master_replid`) its dataset belongs to and when tenure may grant again.
 * A new epoch begins when the marker is missing or names another replication id:
 * - **missing**: the data was lost in a restart (or the server or name is new: the two cannot be
 *   told apart). A lease the restart erased was granted before the server started, so the guard
 *   runs from the server's start (`INFO server` uptime): a server up longer than
 *   `restartGuardMs` grants at once, a just-restarted one waits out the rest.
 * - **another replication id** (or missing on a server that was once a replica, `master_replid2`
 *   set): this server was promoted. A replica may lack the last writes of its old primary — a
 *   lock key, the `INCR` of a fence — so a holder granted there may still be live, and this
 *   counter may be behind fences already handed out. Redis does not say when the promotion
 *   happened, so the guard runs from this first sight of the new id: `restartGuardMs` (≥ every
 *   TTL) after it, every lease of the old primary has passed its holder's local deadline.
 * In both cases the name's fence counter is first raised to the server clock in µs (if below),
 * which exceeds every fence handed out before (the epoch argument above; across hosts it assumes
 * the primary's and replicas' clocks agree to within the failover time, as NTP keeps them). Not
 * covered: data dropped without a restart or failover (`FLUSHALL` while locks are held) on a
 * server up longer than the guard, and a split brain where the old primary keeps serving its
 * clients after the promotion (configure `min-replicas-to-write`; fencing is what catches it).
 * Every key a script touches carries the name's hash tag, so one lock lives in one cluster slot.
 */

/**
 * KEYS: lock, fence counter, epoch marker, queue (ticket → waiter), alive (expiry → waiter),
 * ticket counter. ARGV: token, ttlMs, restartGuardMs, '1' to queue up (a waiting acquire) or '0'
 * (a try), waiterTtlMs, holder id, channel to announce a grant on (for observers; the message is
 * the new holder's token), channel to announce it on for a holder that may not know it lost: a
 * holder that hears another token was granted has lost its key, whoever deleted it, and stops at
 * once — not a renew later. The second is published only when the grant before this one was not
 * released by its holder (the epoch marker's `released` field, written by RELEASE, is not the
 * fence before this one): after a clean release nobody can still think it holds, and the
 * publisher's own process — subscribed as the next holder — is not sent a message per cycle.
 *
 * The lock key's value is `<token>:<fence>:<id>`: the token makes renew and release
 * owner-checked, and the fence and id let anyone ask who holds the lock with one GET (the value
 * is written after the INCR, in this same script).
 *
 * Fair hand-off: the lock goes to a free-lock caller only if nobody waits, or to the waiter at the
 * head of the queue, so a releaser that loops straight back to acquire joins the tail instead of
 * barging past everyone it just woke. Waiters refresh their `alive` entry on every try; one that
 * stops trying (crashed, paused) is dropped `waiterTtlMs` later, so it blocks the queue no longer.
 * Queue keys expire when nobody touches them.
 *
 * Returns {1, fence} on success, {0, pttl} when held or not this caller's turn, {-1, waitMs}
 * while the restart or failover guard holds.
 */
export const ACQUIRE = `
-- The server clock, read once and only where it is needed (a grant that opens an epoch, the
-- guard's wait, a queued waiter's expiry): a grant in an open epoch reads no clock.
local nowUs
local function now()
  if not nowUs then
    local t = redis.call('TIME')
    nowUs = tonumber(t[1]) * 1000000 + tonumber(t[2])
  end
  return nowUs
end
-- The epoch check (see the module note), only where a grant is possible: a waiter's poll while
-- the lock is held skips INFO. Returns how long the guard still holds, in ms (0: grant).
local function guard()
  local repl = redis.call('INFO', 'replication')
  local _, e = string.find(repl, 'master_replid:', 1, true)
  local rid = e and string.match(repl, '^%w+', e + 1) or ''
  local mark = redis.call('HMGET', KEYS[3], 'replid', 'since', 'released', 'open')
  local since = tonumber(mark[2])
  -- 'open': the longest guard this epoch has already been seen past. It stays past (time only
  -- moves on), so a grant in an open epoch needs no clock.
  if mark[1] == rid and since and (tonumber(mark[4]) or -1) >= tonumber(ARGV[3]) then return 0, mark[3] end
  if mark[1] ~= rid or not since then
    local promoted = string.match(repl, 'second_repl_offset:(-?%d+)') ~= '-1'
    if since or promoted then
      -- Promoted: leases of the old primary may live; guard from this first sight.
      since = now()
    else
      -- Lost (or new): no earlier than the server started. uptime_in_seconds is the difference
      -- of two whole-second clock readings, so the real uptime may be up to 1 s shorter.
      local up = tonumber(string.match(redis.call('INFO', 'server'), 'uptime_in_seconds:(%d+)')) or 0
      since = now() - math.max(0, up - 1) * 1000000
    end
    redis.call('HSET', KEYS[3], 'replid', rid, 'since', string.format('%.0f', since))
    redis.call('HDEL', KEYS[3], 'released', 'open')
    mark[3] = false
    local c = tonumber(redis.call('GET', KEYS[2]) or '0')
    if c < now() then redis.call('INCRBY', KEYS[2], string.format('%.0f', now() - c)) end
  end
  local waitUs = since + tonumber(ARGV[3]) * 1000 - now()
  if waitUs > 0 then return math.ceil(waitUs / 1000), mark[3] end
  redis.call('HSET', KEYS[3], 'open', ARGV[3])
  return 0, mark[3]
end
local me = ARGV[1]
local head = nil
-- Free with nobody queued (every uncontended acquire): one EXISTS answers both questions.
local free = redis.call('EXISTS', KEYS[1], KEYS[4]) == 0
if not free then
  head = redis.call('ZRANGE', KEYS[4], 0, 0)[1]
  if head ~= nil then
    local gone = redis.call('ZRANGEBYSCORE', KEYS[5], '-inf', string.format('%.0f', math.floor(now() / 1000)))
    for _, w in ipairs(gone) do
      redis.call('ZREM', KEYS[4], w)
      redis.call('ZREM', KEYS[5], w)
    end
    head = redis.call('ZRANGE', KEYS[4], 0, 0)[1]
  end
  free = (head == nil or head == me) and redis.call('EXISTS', KEYS[1]) == 0
end
if free then
  local waitMs, released = guard()
  if waitMs > 0 then
    return {-1, waitMs}
  end
  if head == me then
    redis.call('ZREM', KEYS[4], me)
    redis.call('ZREM', KEYS[5], me)
  end
  local fence = redis.call('INCR', KEYS[2])
  if fence == 1 then
    -- The counter was missing: seed it with the clock (the epoch argument above), as if it had
    -- held nowUs before this INCR.
    fence = redis.call('INCRBY', KEYS[2], string.format('%.0f', now()))
  end
  local value = me .. ':' .. string.format('%.0f', fence) .. ':' .. ARGV[6]
  redis.call('SET', KEYS[1], value, 'NX', 'PX', ARGV[2])
  redis.call('PUBLISH', ARGV[7], me)
  -- Compared as numbers (fences stay below 2^53, exact in Lua's doubles), not formatted.
  if tonumber(released) ~= fence - 1 then redis.call('PUBLISH', ARGV[8], me) end
  return {1, fence}
end
if ARGV[4] == '1' then
  if not redis.call('ZSCORE', KEYS[4], me) then
    redis.call('ZADD', KEYS[4], redis.call('INCR', KEYS[6]), me)
  end
  local wttl = tonumber(ARGV[5])
  redis.call('ZADD', KEYS[5], string.format('%.0f', math.floor(now() / 1000) + wttl), me)
  for i = 4, 6 do redis.call('PEXPIRE', KEYS[i], 2 * wttl) end
end
return {0, redis.call('PTTL', KEYS[1])}
`;

/** KEYS: queue, alive. ARGV: token. An abandoned wait leaves the queue. */
export const LEAVE_QUEUE = `
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('ZREM', KEYS[2], ARGV[1])
return 1
`;

/** KEYS: lock. ARGV: lock value, ttlMs. Returns 1 when renewed, 0 when the value no longer holds it. */
export const RENEW = `
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
`;

/**
 * KEYS: lock, queue, epoch marker. ARGV: lock value, release channel, its fence. Returns 1 when it
 * deleted its own lock, else 0. The message names the waiter whose turn it is (empty when nobody
 * waits), so only it retries. The marker's `released` field records that this grant ended by its
 * holder's release (see ACQUIRE's lost channel).
 */
export const RELEASE = `
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('HSET', KEYS[3], 'released', ARGV[3])
  -- Nobody queued (every uncontended release): EXISTS answers for less than a ZRANGE.
  local head = redis.call('EXISTS', KEYS[2]) == 1 and redis.call('ZRANGE', KEYS[2], 0, 0)[1] or ''
  redis.call('PUBLISH', ARGV[2], head)
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
 * after a restart emptied the script cache, or on a cluster node that has not seen it). Never
 * mutates the user's client.
 */
export function runScript(redis: RedisClient, src: string, keys: readonly string[], args: (string | number | Buffer)[]): Promise<unknown> {
  const r = redis as Redis;
  // A promise chain, not an async function: one promise layer less on every lock cycle.
  return r.evalsha(sha1(src), keys.length, ...keys, ...args).catch((e: unknown) => {
    if (e instanceof Error && e.message.startsWith('NOSCRIPT')) return r.eval(src, keys.length, ...keys, ...args);
    throw e;
  });
}
