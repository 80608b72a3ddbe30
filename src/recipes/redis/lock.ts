import { randomFillSync } from 'node:crypto';
import { pino, type Logger } from 'pino';
import { raceSignal, sleep, waitScope } from '../../core/abort.js';
import { monotonicClock, type Clock } from '../../core/clock.js';
import { ClosedError, ConfigError } from '../../core/errors.js';
import { LeaseController, type Lease } from '../../core/lease.js';
import { optionalNumber, requireOptions } from '../../core/validate.js';
import { lockKeys, validateLockName, validatePrefix, type LockKeys } from './keys.js';
import { ReleaseListener } from './release-listener.js';
import { ACQUIRE, LEAVE_QUEUE, RELEASE, mapRedisError, requireRedis, runScript, type RedisClient } from './scripts.js';
import { RenewWatchdog } from './watchdog.js';

export interface RedisLockOptions {
  /** Lease TTL set on the lock key (`PX`), renewed every TTL/3. @default 10000 */
  ttlMs?: number;
  /**
   * How long before the store-side expiry the holder's signal aborts, covering timer lateness
   * and clock-rate differences. Must be > 0 and < 2/3 of the TTL. @default ttlMs / 5
   */
  safetyMarginMs?: number;
  /**
   * After Redis lost its data (a restart without persistence), no lock is granted until this long
   * after the server started. Must be ≥ the longest TTL any lock under the same prefix uses. A
   * server that has been up longer than this grants at once; only a just-(re)started one waits
   * out the rest. 0 disables the guard (unsafe across restarts). @default ttlMs
   */
  restartGuardMs?: number;
  /** Prefix of every key and channel. @default 'tenure:' */
  keyPrefix?: string;
  /**
   * Upper bound of the jittered poll interval while waiting (the fallback to the release
   * message). Waiters queue in arrival order; one that has not polled for `3 × retryMaxMs + 1 s`
   * (crashed, paused) loses its place. @default 1000
   */
  retryMaxMs?: number;
  /** Logger; state edges at info, retries at debug. @default silent */
  logger?: Logger;
  /** @default monotonicClock */
  clock?: Clock;
}

export interface AcquireOptions {
  /** Abort the wait (rejects with `signal.reason`). */
  signal?: AbortSignal;
  /** Give up after this long with AcquireTimeoutError. @default no limit */
  timeoutMs?: number;
}

/** Tokens of 16 random bytes, cut from a pool filled 4 KiB at a time (one syscall per 256). */
const pool = Buffer.alloc(4096);
let poolAt = pool.length;
function newToken(): string {
  if (poolAt + 16 > pool.length) {
    randomFillSync(pool);
    poolAt = 0;
  }
  poolAt += 16;
  return pool.toString('hex', poolAt - 16, poolAt);
}

type Attempt = { kind: 'acquired'; lease: Lease } | { kind: 'held'; pttlMs: number } | { kind: 'guard'; waitMs: number };

/**
 * A lock on a single Redis node, with a fencing token and a renewing lease (not Redlock).
 * `acquire()` queues in arrival order and is woken by the releaser's publish (hand-off in about
 * one round trip; polling with jitter as the fallback); every {@link Lease} carries the fence (an
 * `INCR` done in the same script as `SET NX PX`) and a signal driven by its {@link RenewWatchdog},
 * the one owner of the lease's liveness. A lost lease is never re-acquired behind your back.
 *
 * Hazard, stated where you decide: a lease is only as safe as the resource that checks its
 * fence. Pass `lease.fence` to a fenced resource and `lease.signal` to every call you make.
 */
export class RedisLock implements AsyncDisposable {
  readonly name: string;
  readonly ttlMs: number;
  readonly #redis: RedisClient;
  readonly #keys: LockKeys;
  readonly #marginMs: number;
  readonly #guardMs: number;
  readonly #retryMaxMs: number;
  readonly #waiterTtlMs: number;
  readonly #clock: Clock;
  readonly #log: Logger;
  readonly #listener: ReleaseListener;
  readonly #held = new Set<LeaseController>();
  #closed = false;

  constructor(redis: RedisClient, name: string, options?: RedisLockOptions) {
    requireRedis(redis);
    this.name = validateLockName('name', name);
    const o = requireOptions('options', options);
    this.ttlMs = optionalNumber('ttlMs', o.ttlMs, 10_000, { integer: true, min: 30, max: 2 ** 31 - 1 });
    this.#marginMs = optionalNumber('safetyMarginMs', o.safetyMarginMs, this.ttlMs / 5, { min: 0, exclusiveMin: true });
    if (this.#marginMs >= (this.ttlMs * 2) / 3) {
      throw new ConfigError('safetyMarginMs', `must be less than 2/3 of ttlMs (${this.ttlMs}), got ${this.#marginMs}`);
    }
    this.#guardMs = optionalNumber('restartGuardMs', o.restartGuardMs, this.ttlMs, { integer: true, min: 0 });
    if (this.#guardMs !== 0 && this.#guardMs < this.ttlMs) {
      throw new ConfigError('restartGuardMs', `must be at least ttlMs (${this.ttlMs}) or 0, got ${this.#guardMs}`);
    }
    this.#retryMaxMs = optionalNumber('retryMaxMs', o.retryMaxMs, 1000, { min: 1 });
    this.#waiterTtlMs = Math.ceil(3 * this.#retryMaxMs + 1000);
    this.#keys = lockKeys(o.keyPrefix === undefined ? 'tenure:' : validatePrefix('keyPrefix', o.keyPrefix), this.name);
    this.#clock = o.clock ?? monotonicClock;
    this.#log = (o.logger ?? pino({ level: 'silent' })).child({ name: 'redis-lock', id: this.name });
    this.#redis = redis;
    this.#listener = new ReleaseListener(redis, this.#keys.released);
  }

  /**
   * Waits for the lock and resolves with its lease. Rejects with `signal.reason` when `signal`
   * aborts, or AcquireTimeoutError after `timeoutMs`.
   */
  async acquire(options?: AcquireOptions): Promise<Lease> {
    const o = requireOptions('options', options);
    o.signal?.throwIfAborted();
    this.#assertOpen();
    // Without a signal or a timeout there is nothing to race: skip the scope (and its signal).
    const scope = o.signal || o.timeoutMs !== undefined ? waitScope(`redis lock '${this.name}'`, o) : undefined;
    const signal = scope?.signal;
    // One token for the whole wait: it is this caller's place in the queue, then its lock value.
    const token = newToken();
    let queued = false;
    let lease: Lease | undefined;
    try {
      await raceSignal(this.#listener.ready(), signal).catch((e: unknown) => Promise.reject(mapRedisError(e)));
      for (;;) {
        signal?.throwIfAborted();
        const seen = this.#listener.seen(token);
        const pending = this.#attempt(token, true);
        let a: Attempt;
        try {
          a = await raceSignal(pending, signal);
        } catch (e) {
          // Aborted mid-attempt: a lock granted after all must not be left renewing.
          pending.then((x) => (x.kind === 'acquired' ? x.lease.release() : undefined)).catch(() => undefined);
          throw e;
        }
        if (a.kind === 'acquired') {
          if (!signal?.aborted) return (lease = a.lease);
          await a.lease.release().catch(() => undefined);
          signal?.throwIfAborted();
        }
        if (a.kind === 'guard') {
          this.#log.info({ waitMs: a.waitMs }, 'restart guard: waiting for leases of the lost dataset to expire');
          await sleep(a.waitMs, signal);
          continue;
        }
        queued = true;
        const pttl = a.kind === 'held' && a.pttlMs > 0 ? a.pttlMs : this.#retryMaxMs;
        const poll = Math.min(pttl, this.#retryMaxMs * (0.5 + Math.random() / 2));
        this.#log.debug({ pollMs: poll }, 'held elsewhere: waiting for release');
        await this.#listener.wait(token, seen, poll, signal);
      }
    } finally {
      scope?.dispose();
      this.#listener.forget(token);
      if (queued && !lease) {
        // Leave the queue, so the waiters behind need not sit out this one's expiry.
        runScript(this.#redis, LEAVE_QUEUE, [this.#keys.queue, this.#keys.alive], [token]).catch(() => undefined);
      }
    }
  }

  /**
   * One attempt: the lease, or undefined when the lock is held, others are queued for it, or the
   * restart guard holds.
   */
  async tryAcquire(): Promise<Lease | undefined> {
    this.#assertOpen();
    const a = await this.#attempt(newToken(), false);
    return a.kind === 'acquired' ? a.lease : undefined;
  }

  async #attempt(token: string, queue: boolean): Promise<Attempt> {
    const k = this.#keys;
    const sentAt = this.#clock.now();
    const reply = (await runScript(this.#redis, ACQUIRE, [k.lock, k.fence, k.boot, k.queue, k.alive, k.ticket], [
      token,
      this.ttlMs,
      this.#guardMs,
      queue ? '1' : '0',
      this.#waiterTtlMs,
    ])) as [number, number];
    const [status, value] = reply;
    if (status === -1) return { kind: 'guard', waitMs: value };
    if (status === 0) return { kind: 'held', pttlMs: value };
    return { kind: 'acquired', lease: this.#grant(token, BigInt(value), sentAt) };
  }

  #grant(token: string, fence: bigint, sentAt: number): Lease {
    const release = async (): Promise<void> => {
      await runScript(this.#redis, RELEASE, [this.#keys.lock, this.#keys.queue], [token, this.#keys.released]);
    };
    const watchdog = new RenewWatchdog({
      redis: this.#redis,
      name: this.name,
      lockKey: this.#keys.lock,
      token,
      ttlMs: this.ttlMs,
      safetyMarginMs: this.#marginMs,
      sentAt,
      fence,
      clock: this.#clock,
      onLost: (reason) => {
        this.#log.info({ fence: String(fence), reason }, 'lease lost');
        // Best effort: free the key if it is still ours, so waiters need not sit out the TTL.
        release().catch(() => undefined);
      },
    });
    const controller: LeaseController = new LeaseController({
      name: this.name,
      fence,
      clock: this.#clock,
      parent: watchdog.signal,
      deadline: () => watchdog.deadline,
      release: async () => {
        watchdog.stop();
        this.#held.delete(controller);
        await release();
        this.#log.debug({ fence: String(fence) }, 'released');
      },
    });
    controller.lease.signal.addEventListener('abort', () => this.#held.delete(controller), { once: true });
    this.#held.add(controller);
    this.#log.info({ fence: String(fence) }, 'acquired');
    return controller.lease;
  }

  #assertOpen(): void {
    if (this.#closed) throw new ClosedError(`redis lock '${this.name}'`);
  }

  /** Releases any lease this lock still holds and closes the subscriber connection. Idempotent. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await Promise.allSettled([...this.#held].map((c) => c.release()));
    await this.#listener.close();
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }
}
