import { LeaseEmitter } from '../../core/lease-events.js';
import { sleep, waitScope } from '../../core/abort.js';
import { Backoff } from '../../core/backoff.js';
import type { LeaderInfo } from '../../core/candidate.js';
import type { Clock } from '../../core/clock.js';
import { leaseTiming } from '../../core/deadline.js';
import { BusyError, ClosedError, ConfigError } from '../../core/errors.js';
import { LeaseController, type Lease } from '../../core/lease.js';
import { optionalClock, optionalLogger, WAIT_KEYS, type Logger, type WaitOptions } from '../../core/options.js';
import { optionalId, optionalNumber, optionalSignal, requireOptions, type OptionKeys } from '../../core/validate.js';
import { requireRedis, type RedisClient } from './client.js';
import { lockKeys, validateLockName, validatePrefix, type LockKeys } from './keys.js';
import { ReleaseListener } from './release-listener.js';
import { ChangeFeed } from './observe.js';
import { lockValue, newToken, parseHolder } from './lock-value.js';
import { bounded } from './errors.js';
import { ACQUIRE, LEAVE_QUEUE, RELEASE, runScript } from './scripts.js';
import { RenewWatchdog } from './watchdog.js';
import { inWindow } from '../../core/window.js';

/** Options of a {@link RedisLock}. */
export interface RedisLockOptions {
  /** This participant's id, stored with the lock while held; what `holder()` shows. @default a random UUID */
  id?: string;
  /** Lease TTL set on the lock key (`PX`), renewed every TTL/3. @default 10000 */
  ttlMs?: number;
  /**
   * How long before the store-side expiry the holder's signal aborts (the local deadline: send
   * time of the last acknowledged renew + TTL − margin), covering timer lateness and clock-rate
   * differences. Must be > 0 and < 2/3 of the TTL. @default ttlMs / 5
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
  /**
   * Bound on every call to Redis in ms (each acquire attempt, release, holder, the subscription):
   * a server that is down or blackholed answers with StoreUnavailableError within it instead of
   * when ioredis gives up. @default 5000
   */
  callTimeoutMs?: number;
  /** Logger; state edges at info, retries at debug. @default silent */
  logger?: Logger;
  /** @default the monotonic clock */
  clock?: Clock;
}

/** @internal the keys of {@link RedisLockOptions}. */
export const REDIS_LOCK_KEYS: OptionKeys<RedisLockOptions> = { id: true, ttlMs: true, safetyMarginMs: true, restartGuardMs: true, keyPrefix: true, retryMaxMs: true, callTimeoutMs: true, logger: true, clock: true };

type Attempt = { kind: 'acquired'; lease: Lease } | { kind: 'held'; pttlMs: number } | { kind: 'guard'; waitMs: number };

/**
 * A lock on a single Redis node, with a fencing token and a renewing lease (not Redlock).
 * `acquire()` queues in arrival order and is woken by the releaser's publish (hand-off in about
 * one round trip; polling with jitter as the fallback); every {@link Lease} carries the fence (an
 * `INCR` done in the same script as `SET NX PX`) and a signal driven by its `RenewWatchdog`,
 * the one owner of the lease's liveness. A lost lease is never re-acquired behind your back.
 *
 * Hazard, stated where you decide: a lease is only as safe as the resource that checks its
 * fence. Pass `lease.fence` to a fenced resource and `lease.signal` to every call you make.
 */
export class RedisLock extends LeaseEmitter implements AsyncDisposable {
  /** The lock's name. */
  readonly name: string;
  /** This participant's id (stored with the lock while held). */
  readonly id: string;
  /** The lease TTL in ms. */
  readonly ttlMs: number;
  readonly #redis: RedisClient;
  readonly #keys: LockKeys;
  readonly #marginMs: number;
  readonly #guardMs: number;
  readonly #retryMaxMs: number;
  readonly #callTimeoutMs: number;
  readonly #waiterTtlMs: number;
  readonly #clock: Clock;
  /** @internal */
  readonly logger: Logger;
  readonly #listener: ReleaseListener;
  /** What the hot calls are named in errors (made once, not per cycle). */
  readonly #whatAcquire: string;
  readonly #whatRelease: string;
  #held: LeaseController | undefined;
  #busy = false;
  #closed = false;
  /** Withdrawals still on their way to Redis (a left queue place, a late grant's release): close() waits for them. */
  readonly #withdrawals = new Set<Promise<unknown>>();

  constructor(redis: RedisClient, name: string, options?: RedisLockOptions) {
    super();
    this.#redis = requireRedis(redis);
    this.name = validateLockName('name', name);
    const o = requireOptions('options', options, REDIS_LOCK_KEYS);
    this.id = optionalId(o.id);
    const timing = leaseTiming(o, { minTtlMs: 30 });
    this.ttlMs = timing.ttlMs;
    this.#marginMs = timing.safetyMarginMs;
    this.#guardMs = optionalNumber('restartGuardMs', o.restartGuardMs, this.ttlMs, { integer: true, min: 0, max: 2 ** 31 - 1 });
    if (this.#guardMs !== 0 && this.#guardMs < this.ttlMs) {
      throw new ConfigError('restartGuardMs', `must be at least ttlMs (${this.ttlMs}) or 0, got ${this.#guardMs}`);
    }
    this.#retryMaxMs = optionalNumber('retryMaxMs', o.retryMaxMs, 1000, { min: 1, max: 600_000 });
    this.#waiterTtlMs = Math.ceil(3 * this.#retryMaxMs + 1000);
    this.#callTimeoutMs = optionalNumber('callTimeoutMs', o.callTimeoutMs, 5000, { integer: true, min: 1, max: 2 ** 31 - 1 });
    this.#keys = lockKeys(o.keyPrefix === undefined ? 'tenure:' : validatePrefix('keyPrefix', o.keyPrefix), this.name);
    this.#clock = optionalClock(o.clock);
    this.logger = optionalLogger(o.logger, { component: 'redis-lock', lock: this.name });
    this.#listener = new ReleaseListener(redis, this.#keys.released, this.#keys.lost);
    this.#whatAcquire = `redis lock '${this.name}': acquire`;
    this.#whatRelease = `redis lock '${this.name}': release`;
  }

  /**
   * Waits for the lock and resolves with its lease. Rejects with `signal.reason` when `signal`
   * aborts, or AcquireTimeoutError after `timeoutMs`.
   */
  async acquire(options?: WaitOptions): Promise<Lease> {
    const o = requireOptions('options', options, WAIT_KEYS);
    optionalSignal('signal', o.signal);
    o.signal?.throwIfAborted();
    this.#enter();
    // Without a signal or a timeout there is nothing to race: skip the scope (and its signal).
    const scope = o.signal || o.timeoutMs !== undefined ? waitScope(`redis lock '${this.name}'`, o) : undefined;
    const signal = scope?.signal;
    // One token for the whole wait: it is this caller's place in the queue, then its lock value.
    const token = newToken();
    let queued = false;
    let lease: Lease | undefined;
    // The fallback poll (the release message usually comes first), jittered through the backoff policy.
    let polls: Backoff | undefined;
    try {
      // The channel a holder hears a lost grant on, in place before anything can be granted.
      const holderReady = this.#listener.holderReady();
      if (holderReady) await bounded(this.#redis, holderReady, this.#callTimeoutMs, `redis lock '${this.name}': subscribe`, signal);
      for (;;) {
        signal?.throwIfAborted();
        this.#assertOpen(); // close() wakes every waiter
        const seen = this.#listener.seen(token);
        // Aborted or timed out mid-attempt: a lock granted after all must not be left renewing.
        const attempt = (): Promise<Attempt> => bounded(this.#redis, this.#attempt(token, true), this.#callTimeoutMs, this.#whatAcquire, signal, this.#releaseLate);
        // The first attempt within the client's window of joins in flight (see core/window.ts).
        const a = polls === undefined ? await inWindow(this.#redis, signal, attempt) : await attempt();
        if (a.kind === 'acquired') {
          // A grant whose reply came after its own local deadline (the request sat in a
          // partition) is lost before it is handed out: free it and go on waiting.
          if (!signal?.aborted && !a.lease.lost) return (lease = this.announce(a.lease));
          await a.lease.release().catch(() => undefined);
          signal?.throwIfAborted();
        }
        if (a.kind === 'guard') {
          this.logger.info({ waitMs: a.waitMs }, 'restart guard: waiting for leases of the lost dataset to expire');
          await sleep(a.waitMs, signal);
          continue;
        }
        queued = true;
        if (!this.#listener.subscribed) {
          // The release channel is subscribed on the first wait, not before every acquire (its
          // messages would reach this process on every cycle of an uncontended lock). A release
          // before it was in place is seen by the attempt made next, at once.
          await bounded(this.#redis, this.#listener.ready(), this.#callTimeoutMs, `redis lock '${this.name}': subscribe`, signal);
          continue;
        }
        const pttl = a.kind === 'held' && a.pttlMs > 0 ? a.pttlMs : this.#retryMaxMs;
        polls ??= new Backoff({ initialMs: Math.max(1, this.#retryMaxMs / 2), maxMs: this.#retryMaxMs });
        const poll = Math.min(pttl, polls.next());
        this.logger.debug({ pollMs: poll }, 'held elsewhere: waiting for release');
        await this.#listener.wait(token, seen, poll, signal);
      }
    } finally {
      this.#busy = false;
      scope?.dispose();
      this.#listener.forget(token);
      if (queued && !lease) {
        // Leave the queue, so the waiters behind need not sit out this one's expiry.
        this.#withdraw(runScript(this.#redis, LEAVE_QUEUE, [this.#keys.queue, this.#keys.alive], [token]));
      }
    }
  }

  /**
   * One attempt: the lease, or undefined when the lock is held, others are queued for it, the
   * restart guard holds, or the grant came back after its own local deadline.
   */
  async tryAcquire(options?: WaitOptions): Promise<Lease | undefined> {
    const o = requireOptions('options', options, WAIT_KEYS);
    optionalSignal('signal', o.signal);
    o.signal?.throwIfAborted();
    this.#enter();
    const scope = o.signal || o.timeoutMs !== undefined ? waitScope(`redis lock '${this.name}': tryAcquire`, o) : undefined;
    try {
      const a = await bounded(this.#redis, this.#attempt(newToken(), false), this.#callTimeoutMs, `redis lock '${this.name}': tryAcquire`, scope?.signal, this.#releaseLate);
      if (a.kind !== 'acquired') return undefined;
      if (!a.lease.lost) return this.announce(a.lease);
      await a.lease.release().catch(() => undefined); // lost before it was handed out: no grant
      return undefined;
    } finally {
      this.#busy = false;
      scope?.dispose();
    }
  }

  /** The held Lease, while this object holds the lock. */
  get lease(): Lease | undefined {
    return this.#held && !this.#held.lease.lost ? this.#held.lease : undefined;
  }

  /** Who holds the lock (id and fence), read from Redis; undefined when nobody does. */
  async holder(options?: WaitOptions): Promise<LeaderInfo | undefined> {
    const o = requireOptions('options', options, WAIT_KEYS);
    const scope = waitScope(`redis lock '${this.name}': holder`, { signal: optionalSignal('signal', o.signal), timeoutMs: o.timeoutMs });
    try {
      return parseHolder(await bounded(this.#redis, this.#redis.get(this.#keys.lock), this.#callTimeoutMs, `redis lock '${this.name}': holder`, scope.signal));
    } finally {
      scope.dispose();
    }
  }

  /** @internal a feed of hints that the holder may have changed (its own subscriber connection). */
  changeFeed(): ChangeFeed {
    return new ChangeFeed(this.#redis, [this.#keys.acquired, this.#keys.released]);
  }

  #attempt(token: string, queue: boolean): Promise<Attempt> {
    const k = this.#keys;
    const sentAt = this.#clock.now();
    // A promise chain, not an async function: one layer less in every lock cycle.
    return runScript(this.#redis, ACQUIRE, k.acquireKeys, [token, this.ttlMs, this.#guardMs, queue ? '1' : '0', this.#waiterTtlMs, this.id, k.acquired, k.lost]).then((reply): Attempt => {
      const status = (reply as [number, number])[0];
      const value = (reply as [number, number])[1];
      if (status === -1) return { kind: 'guard', waitMs: value };
      if (status === 0) return { kind: 'held', pttlMs: value };
      return { kind: 'acquired', lease: this.#grant(token, BigInt(value), sentAt) };
    });
  }

  #grant(token: string, fence: bigint, sentAt: number): Lease {
    const value = lockValue(token, fence, this.id);
    const release = (): Promise<unknown> => bounded(this.#redis, runScript(this.#redis, RELEASE, this.#keys.releaseKeys, [value, this.#keys.released, String(fence)]), this.#callTimeoutMs, this.#whatRelease);
    const watchdog = new RenewWatchdog({
      redis: this.#redis,
      name: this.name,
      lockKey: this.#keys.lock,
      value,
      ttlMs: this.ttlMs,
      safetyMarginMs: this.#marginMs,
      sentAt,
      fence,
      clock: this.#clock,
      // Told directly, not through the watchdog's signal: no signal is made in a cycle nobody reads it in.
      onLost: (error) => {
        controller.lose(error.reason, error);
        this.logger.info({ fence: String(fence), reason: error.reason }, 'lease lost');
        // Best effort: free the key if it is still ours, so waiters need not sit out the TTL.
        release().catch(() => undefined);
      },
    });
    const controller: LeaseController = new LeaseController({
      name: this.name,
      fence,
      clock: this.#clock,
      logger: this.logger,
      deadline: () => watchdog.deadline,
      // (the end hook below has stopped the watchdog by now: release() ends the lease first)
      release: () => release().then(() => this.logger.debug({ fence: String(fence) }, 'released')),
    });
    controller.onEnd(() => {
      watchdog.stop(); // however it ended: no renew of a lease its holder was told it lost
      this.#listener.unwatch(token);
      if (this.#held === controller) this.#held = undefined;
    });
    this.#listener.watchHolder(token, () => controller.lose('expired', undefined, `${this.name}: the lock was granted to another holder (our key was deleted or expired)`));
    this.#held = controller;
    this.logger.info({ fence: String(fence) }, 'acquired');
    return controller.lease;
  }

  #assertOpen(): void {
    if (this.#closed) throw new ClosedError(`redis lock '${this.name}'`);
  }

  #enter(): void {
    this.#assertOpen();
    if (this.#busy || this.lease) throw new BusyError(`redis lock '${this.name}': this lock object already waits or holds (one object is one participant)`);
    this.#busy = true;
  }

  /** An attempt that was granted after its caller gave up: release it at once. */
  readonly #releaseLate = (a: Attempt): void => {
    if (a.kind === 'acquired') this.#withdraw(a.lease.release());
  };

  /** Sends a withdrawal in the background; close() waits for it (within callTimeoutMs). A failure is the `error` event's (the store expires what it left). */
  #withdraw(p: Promise<unknown>): void {
    const bound = bounded(this.#redis, p, this.#callTimeoutMs, `redis lock '${this.name}': withdraw`).catch((e: unknown) => {
      this.logger.warn({ err: e }, 'withdrawal did not reach the store; it expires there');
      this.emit('error', e, undefined);
    });
    this.#withdrawals.add(bound);
    void bound.finally(() => this.#withdrawals.delete(bound));
  }

  /**
   * Aborts a pending acquire (ClosedError), releases a held lease, waits for the withdrawals still
   * in flight (a place in the queue left by a wait that timed out or was aborted: a process that
   * exits right after must not leave it for the waiters behind to sit out), closes the subscriber
   * connection. Idempotent.
   */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await this.#held?.release().catch(() => undefined);
    await Promise.all(this.#withdrawals);
    await this.#listener.close();
  }

  /** Same as `close()`, for `await using`. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }
}
