import type { Clock } from '../../core/clock.js';
import { leaseTiming } from '../../core/deadline.js';
import { BusyError } from '../../core/errors.js';
import { memberValue, normalizeMembers, parseMember, sameMembers, type Member } from '../../core/membership.js';
import { observeByReading } from '../../core/observe.js';
import { optionalClock, optionalLogger, type Logger } from '../../core/options.js';
import { optionalWeight, StoreMembership, type MembershipDriver } from '../../core/store-membership.js';
import { optionalId, optionalNumber, requireOptions } from '../../core/validate.js';
import { requireRedis, type RedisClient } from './client.js';
import { bounded } from './errors.js';
import { validateLockName, validatePrefix } from './keys.js';
import { newToken } from './lock-value.js';
import { ChangeFeed } from './observe.js';
import { runScript } from './scripts.js';
import { RenewWatchdog } from './watchdog.js';

/** Options of a {@link RedisMembership}. */
export interface RedisMembershipOptions {
  /** This member's id, unique in the group. @default a random UUID */
  id?: string;
  /** Its share of the work relative to the other members (> 0). @default 1 */
  weight?: number;
  /** TTL of the member's key (`PX`), renewed every TTL/3 by its watchdog, as a lock's lease is. @default 10000 */
  ttlMs?: number;
  /** How long before the key's expiry the member counts itself out (the local deadline). Must be > 0 and < 2/3 of the TTL. @default ttlMs / 5 */
  safetyMarginMs?: number;
  /** Prefix of every key and channel. @default 'tenure:' */
  keyPrefix?: string;
  /** Longest time between two reads of the set in `observe()` (joins and leaves are also announced; an expiry is not). @default 1000 */
  observeIntervalMs?: number;
  /** Bound on every call to Redis in ms. @default 5000 */
  callTimeoutMs?: number;
  /** @default silent */
  logger?: Logger;
  /** @default the monotonic clock */
  clock?: Clock;
}

/**
 * KEYS: member key, registry (hash of ids). ARGV: value, ttlMs, id, channel. Returns 1 when the
 * key is this member's now, 0 when another live member holds the id.
 */
const JOIN = `
local cur = redis.call('GET', KEYS[1])
if cur and cur ~= ARGV[1] then return 0 end
if cur then redis.call('PEXPIRE', KEYS[1], ARGV[2]) else redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) end
redis.call('HSET', KEYS[2], ARGV[3], '1')
if not cur then redis.call('PUBLISH', ARGV[4], ARGV[3]) end
return 1
`;

/** KEYS: member key, registry. ARGV: value, id, channel. Removes the member if the key is still its own. */
const LEAVE = `
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('HDEL', KEYS[2], ARGV[2])
  redis.call('PUBLISH', ARGV[3], ARGV[2])
  return 1
end
return 0
`;

/** KEYS: registry, then the member keys of ARGV's ids. Drops the ids whose key has expired. */
const PRUNE = `
for i, id in ipairs(ARGV) do
  if redis.call('EXISTS', KEYS[i + 1]) == 0 then redis.call('HDEL', KEYS[1], id) end
end
return 1
`;

/**
 * Group membership on a Redis node: each member is one key, `<prefix>member:{<group>}:<id>`,
 * written with `PX` and renewed every TTL/3 by the same watchdog (and local deadline) that keeps a
 * RedisLock's lease, and listed in the hash `<prefix>members:{<group>}` (one cluster slot per
 * group). A member whose process dies or freezes drops out when its key expires (the TTL); one
 * that leaves drops out at once; after its key is lost (a failed renew, a restart that lost the
 * data) it joins again. Observers re-read on every join or leave message and at least every
 * `observeIntervalMs`, so an expiry is seen within TTL + observeIntervalMs.
 */
export class RedisMembership extends StoreMembership {
  constructor(redis: RedisClient, group: string, options?: RedisMembershipOptions) {
    const client = requireRedis(redis);
    const name = validateLockName('group', group);
    const o = requireOptions('options', options, { id: true, weight: true, ttlMs: true, safetyMarginMs: true, keyPrefix: true, observeIntervalMs: true, callTimeoutMs: true, logger: true, clock: true });
    const id = optionalId(o.id);
    const weight = optionalWeight(o.weight);
    const timing = leaseTiming(o, { minTtlMs: 30 });
    const prefix = o.keyPrefix === undefined ? 'tenure:' : validatePrefix('keyPrefix', o.keyPrefix);
    super(
      name,
      id,
      weight,
      new RedisMembers(client, name, prefix, { id, weight }, {
        ...timing,
        intervalMs: optionalNumber('observeIntervalMs', o.observeIntervalMs, 1000, { min: 10, max: 2 ** 31 - 1 }),
        callTimeoutMs: optionalNumber('callTimeoutMs', o.callTimeoutMs, 5000, { integer: true, min: 1, max: 2 ** 31 - 1 }),
        clock: optionalClock(o.clock),
        logger: optionalLogger(o.logger, { component: 'redis-membership', group: name, id }),
      }),
    );
  }
}

interface Timing {
  ttlMs: number;
  safetyMarginMs: number;
  intervalMs: number;
  callTimeoutMs: number;
  clock: Clock;
  logger: Logger;
}

/** The driver: one key with a TTL, kept by a RenewWatchdog; the value `<token>:<member JSON>`. */
class RedisMembers implements MembershipDriver {
  readonly what: string;
  readonly logger: Logger;
  readonly #redis: RedisClient;
  readonly #t: Timing;
  readonly #id: string;
  readonly #keyPrefix: string;
  readonly #key: string;
  readonly #registry: string;
  readonly #channel: string;
  /** One token per membership object: a rejoin finds its own key and renews it. */
  readonly #value: string;
  #watchdog: RenewWatchdog | undefined;

  constructor(redis: RedisClient, group: string, prefix: string, me: Member, t: Timing) {
    this.what = `redis membership '${group}'`;
    this.logger = t.logger;
    this.#redis = redis;
    this.#t = t;
    this.#id = me.id;
    this.#keyPrefix = `${prefix}member:{${group}}:`;
    this.#key = this.#keyPrefix + me.id;
    this.#registry = `${prefix}members:{${group}}`;
    this.#channel = `${prefix}members-changed:{${group}}`;
    this.#value = `${newToken()}:${memberValue(me)}`;
  }

  async enter(signal: AbortSignal): Promise<AbortSignal> {
    this.#watchdog?.stop();
    const sentAt = this.#t.clock.now();
    // A join applied after the caller gave up is undone, so no key of it waits out its TTL.
    const late = (ok: unknown): void => void (ok === 1 && this.#leave().catch(() => undefined));
    const ok = await bounded(this.#redis, runScript(this.#redis, JOIN, [this.#key, this.#registry], [this.#value, this.#t.ttlMs, this.#id, this.#channel]), this.#t.callTimeoutMs, `${this.what}: join`, signal, late);
    if (ok !== 1) throw new BusyError(`${this.what}: '${this.#id}' is already a live member; ids are unique in a group`);
    const watchdog = new RenewWatchdog({ redis: this.#redis, name: this.what, lockKey: this.#key, value: this.#value, ttlMs: this.#t.ttlMs, safetyMarginMs: this.#t.safetyMarginMs, sentAt, fence: 0n, clock: this.#t.clock });
    this.#watchdog = watchdog;
    return watchdog.signal;
  }

  async exit(): Promise<void> {
    const w = this.#watchdog;
    this.#watchdog = undefined;
    if (!w) return;
    w.stop();
    if (w.signal.aborted) return; // lost: the key expires by itself
    await this.#leave();
  }

  #leave(): Promise<unknown> {
    return bounded(this.#redis, runScript(this.#redis, LEAVE, [this.#key, this.#registry], [this.#value, this.#id, this.#channel]), this.#t.callTimeoutMs, `${this.what}: leave`);
  }

  async read(signal?: AbortSignal): Promise<Member[]> {
    const ids = await bounded(this.#redis, this.#redis.hkeys(this.#registry), this.#t.callTimeoutMs, `${this.what}: members`, signal);
    if (ids.length === 0) return [];
    const keys = ids.map((id) => this.#keyPrefix + id);
    const values = await bounded(this.#redis, this.#redis.mget(...keys), this.#t.callTimeoutMs, `${this.what}: members`, signal);
    const out: Member[] = [];
    const expired: string[] = [];
    values.forEach((v, i) => {
      const m = v === null ? undefined : parseMember(v.slice(v.indexOf(':') + 1));
      if (m) out.push(m);
      else if (v === null) expired.push(ids[i]!);
    });
    if (expired.length > 0) runScript(this.#redis, PRUNE, [this.#registry, ...expired.map((id) => this.#keyPrefix + id)], expired).catch(() => undefined);
    return normalizeMembers(out);
  }

  async *watch(signal: AbortSignal): AsyncGenerator<Member[], void, undefined> {
    const feed = new ChangeFeed(this.#redis, [this.#channel]);
    try {
      yield* observeByReading<Member[]>({ read: (s) => this.read(s), same: sameMembers, changed: (ms, s) => feed.next(ms, s), intervalMs: this.#t.intervalMs, retryable: () => true, logger: this.logger }, signal);
    } finally {
      feed.close();
    }
  }
}
