import { ConfigError, StaleFenceError } from '../../core/errors.js';
import { refused } from '../../core/fence-events.js';
import { waitScope } from '../../core/abort.js';
import { WAIT_KEYS, type WaitOptions } from '../../core/options.js';
import { optionalNumber, requireFunction, requireOptions, requireString } from '../../core/validate.js';
import { requireRedis, type RedisClient } from './client.js';
import { bounded } from './errors.js';
import { runScript } from './scripts.js';
import { requireFence, type FencedResource } from '../../core/fencing.js';

/**
 * Compares the fence and applies the queued writes in one script. Fences are compared as
 * decimal strings (length, then digits) so values beyond 2^53 (ZooKeeper zxids) stay exact.
 * KEYS[1]: the fence hash; KEYS[2..]: one key per op. ARGV: fence, op count, then per op its
 * command, argument count and arguments. The fence is recorded after the ops, so an op that fails
 * (WRONGTYPE, say) leaves the fence unmoved; Redis does not roll back ops applied before it.
 */
const WRITE = `
local f = ARGV[1]
local cur = redis.call('HGET', KEYS[1], 'fence')
if cur and (#f < #cur or (#f == #cur and f < cur)) then
  return {0, cur}
end
local ai = 3
for i = 1, tonumber(ARGV[2]) do
  local op = ARGV[ai]
  local n = tonumber(ARGV[ai + 1])
  local args = {}
  for j = 1, n do args[j] = ARGV[ai + 1 + j] end
  ai = ai + 2 + n
  redis.call(op, KEYS[i + 1], unpack(args))
end
redis.call('HSET', KEYS[1], 'fence', f)
return {1, f}
`;

type Op = { cmd: string; key: string; args: (string | Buffer)[] };

/** A command argument: a string, a finite number or a Buffer; anything else is a ConfigError (never "[object Object]"). */
function arg(value: unknown, i: number): string | Buffer {
  if (typeof value === 'string') return value;
  if (typeof value === 'number' && Number.isFinite(value)) return String(value);
  if (typeof value === 'bigint') return value.toString();
  if (Buffer.isBuffer(value)) return value;
  throw new ConfigError(`value[${i}]`, `must be a string, a finite number or a Buffer, got ${value === null ? 'null' : typeof value}`);
}

/**
 * What a {@link RedisFencedResource} write function receives: it queues data writes, applied
 * atomically with the fence check once the function returns (nothing is sent if it throws).
 */
export class RedisFencedWrite {
  /** @internal */
  readonly ops: Op[] = [];

  #push(cmd: string, key: string, args: unknown[]): this {
    requireString('key', key, { maxLength: 1024 });
    this.ops.push({ cmd, key, args: args.map((a, i) => arg(a, i)) });
    return this;
  }

  /** `SET key value` */
  set(key: string, value: string | number | Buffer): this {
    return this.#push('SET', key, [value]);
  }
  /** `HSET key field value …` */
  hset(key: string, fields: Record<string, string | number>): this {
    if (fields === null || typeof fields !== 'object') throw new ConfigError('fields', 'must be an object of field → value');
    const flat = Object.entries(fields).flat();
    if (flat.length === 0) throw new ConfigError('fields', 'must not be empty');
    return this.#push('HSET', key, flat);
  }
  /** `HDEL key field …` */
  hdel(key: string, ...fields: string[]): this {
    return this.#push('HDEL', key, fields);
  }
  /** `INCRBY key by` */
  incrby(key: string, by: number): this {
    if (!Number.isSafeInteger(by)) throw new ConfigError('by', `must be a safe integer, got ${String(by)}`);
    return this.#push('INCRBY', key, [by]);
  }
  /** `RPUSH key value …` */
  rpush(key: string, ...values: (string | number)[]): this {
    return this.#push('RPUSH', key, values);
  }
  /** `SADD key member …` */
  sadd(key: string, ...members: (string | number)[]): this {
    return this.#push('SADD', key, members);
  }
  /** `UNLINK key` (removes a data key; never used on lock keys) */
  unlink(key: string): this {
    return this.#push('UNLINK', key, []);
  }
}

/** Options of a {@link RedisFencedResource}. */
export interface RedisFencedResourceOptions {
  /**
   * Bound on each write in ms: past it the write rejects with StoreUnavailableError and its
   * outcome is unknown (it may still apply, fence-checked, when the connection comes back).
   * @default 5000
   */
  callTimeoutMs?: number;
}

/**
 * A {@link FencedResource} in Redis: the highest accepted fence lives in the hash at `key`
 * (field `fence`), and each write's data commands run in the same Lua script that checks it, so a
 * stale holder's write is refused atomically. Single node (or keys that share a hash slot).
 * Your function runs first, only to queue commands on the {@link RedisFencedWrite} it receives;
 * nothing it queued reaches Redis unless the fence passes (so keep side effects out of it).
 *
 * ```ts
 * const ledger = new RedisFencedResource(redis, 'ledger:fence');
 * await ledger.write(lease.fence, (w) => w.set('ledger:balance', 42));
 * ```
 */
export class RedisFencedResource implements FencedResource<RedisFencedWrite> {
  readonly name: string;
  readonly #redis: RedisClient;
  readonly #callTimeoutMs: number;

  /** @param key the Redis key holding the fence (a hash), also the resource's name. */
  constructor(redis: RedisClient, key: string, options?: RedisFencedResourceOptions) {
    this.#redis = requireRedis(redis);
    this.name = requireString('key', key, { maxLength: 1024 });
    this.#callTimeoutMs = optionalNumber('callTimeoutMs', requireOptions('options', options, { callTimeoutMs: true }).callTimeoutMs, 5000, { integer: true, min: 1, max: 2 ** 31 - 1 });
  }

  /**
   * Runs `fn` to queue the writes, then sends them with the fence check. `options.signal` /
   * `timeoutMs` bound the whole write (rejecting with exactly `signal.reason`, or
   * AcquireTimeoutError); given up on before the script is sent, nothing is written; after, its
   * outcome is unknown as past `callTimeoutMs` (it may still apply, fence-checked, when the
   * connection comes back).
   */
  async write<T>(fence: bigint, fn: (w: RedisFencedWrite) => T | Promise<T>, options?: WaitOptions): Promise<T> {
    requireFence(fence);
    requireFunction('fn', fn);
    const what = `fenced write to ${this.name}`;
    const scope = waitScope(what, requireOptions('options', options, WAIT_KEYS));
    try {
      scope.signal.throwIfAborted();
      const w = new RedisFencedWrite();
      const result = await fn(w);
      scope.signal.throwIfAborted();
      const args: (string | number | Buffer)[] = [fence.toString(), w.ops.length];
      for (const op of w.ops) args.push(op.cmd, op.args.length, ...op.args);
      const call = runScript(this.#redis, WRITE, [this.name, ...w.ops.map((o) => o.key)], args) as Promise<[number, string]>;
      const [ok, highest] = await bounded(this.#redis, call, this.#callTimeoutMs, what, scope.signal);
      if (ok !== 1) throw refused(new StaleFenceError(fence, BigInt(highest), this.name));
      return result;
    } finally {
      scope.dispose();
    }
  }

  /** The highest fence accepted so far; `options` bounds the read (within `callTimeoutMs` either way). */
  async highestFence(options?: WaitOptions): Promise<bigint> {
    const what = `highestFence of ${this.name}`;
    const scope = waitScope(what, requireOptions('options', options, WAIT_KEYS));
    try {
      scope.signal.throwIfAborted();
      const v = await bounded(this.#redis, this.#redis.hget(this.name, 'fence'), this.#callTimeoutMs, what, scope.signal);
      return v === null ? 0n : BigInt(v);
    } finally {
      scope.dispose();
    }
  }
}
