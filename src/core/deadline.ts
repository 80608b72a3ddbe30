import type { Clock } from './clock.js';
import { MAX_TIMER_MS } from './abort.js';
import { ConfigError } from './errors.js';
import { optionalNumber } from './validate.js';

/**
 * The local lease deadline, written once for every backend: the send time of the last
 * acknowledged refresh (etcd keepalive, ZooKeeper heartbeat, Redis renew, Postgres heartbeat)
 * plus the TTL minus a safety margin, on the injected monotonic clock. The store started its TTL
 * no earlier than that send, so the deadline passes strictly before the store can expire the
 * lease and grant it to someone else — however late the acknowledgement arrived.
 */


/** A validated TTL and safety margin. */
export interface LeaseTiming {
  /** The lease TTL in ms. */
  readonly ttlMs: number;
  /** How long before the store could expire the lease the holder stops, in ms. */
  readonly safetyMarginMs: number;
}

export interface LeaseTimingRule {
  /** @default 10000 */
  defaultTtlMs?: number;
  /** Smallest TTL the store supports. */
  minTtlMs: number;
  /** Largest TTL the store supports. @default MAX_TIMER_MS */
  maxTtlMs?: number;
  /** The store counts its TTL in these units (etcd: whole seconds). @default 1 */
  ttlUnitMs?: number;
}

/**
 * Validates `ttlMs` and `safetyMarginMs` with the one margin rule every backend follows: refreshes
 * go out every TTL/3, and the margin must leave room for one failed refresh and its retry, so
 * `0 < safetyMarginMs < 2/3 × ttlMs`; the default is `ttlMs / 5`.
 */
export function leaseTiming(options: { ttlMs?: unknown; safetyMarginMs?: unknown }, rule: LeaseTimingRule): LeaseTiming {
  const unit = rule.ttlUnitMs ?? 1;
  const ttlMs = optionalNumber('ttlMs', options.ttlMs, rule.defaultTtlMs ?? 10_000, { integer: true, min: rule.minTtlMs, max: rule.maxTtlMs ?? MAX_TIMER_MS });
  if (ttlMs % unit !== 0) throw new ConfigError('ttlMs', `must be a whole multiple of ${unit} ms (the store counts its TTL in ${unit === 1000 ? 'seconds' : `${unit} ms units`}), got ${ttlMs}`);
  const safetyMarginMs = optionalNumber('safetyMarginMs', options.safetyMarginMs, ttlMs / 5, { min: 0, exclusiveMin: true });
  if (safetyMarginMs >= (ttlMs * 2) / 3) {
    throw new ConfigError('safetyMarginMs', `must be less than 2/3 of ttlMs (${ttlMs}), got ${safetyMarginMs}`);
  }
  return { ttlMs, safetyMarginMs };
}

export interface LocalDeadlineInit {
  readonly clock: Clock;
  readonly safetyMarginMs: number;
  /** Called once, when the deadline is found passed (by its timer or a synchronous check). */
  readonly onExpire: (lateMs: number) => void;
}

/**
 * One lease's local deadline. `acknowledged(sentAt, ttlMs)` moves it to
 * `sentAt + ttlMs − safetyMarginMs` (never back); `expired()` checks it synchronously; a timer
 * fires `onExpire` when it passes with no acknowledgement in between. Once expired it stays
 * expired: a late acknowledgement never revives a lease its holder was told it lost.
 */
export class LocalDeadline {
  readonly #init: LocalDeadlineInit;
  #at: number;
  #timer: NodeJS.Timeout | undefined;
  #state: 'live' | 'expired' | 'stopped' = 'live';

  /**
   * Starts at `sentAt + ttlMs − margin` (the grant's own send time and TTL). With `armed: false`
   * the timer waits for {@link arm}: for an owner whose own earlier timer checks `expired()` first.
   */
  constructor(init: LocalDeadlineInit, sentAt: number, ttlMs: number, options?: { armed?: boolean }) {
    this.#init = init;
    this.#at = sentAt + ttlMs - init.safetyMarginMs;
    if (options?.armed !== false) this.#arm();
  }

  /** Starts the timer (no-op when it runs already, or the deadline is no longer live). */
  arm(): void {
    if (this.#timer === undefined && this.#state === 'live') this.#arm();
  }

  /** The deadline, in the clock's milliseconds. */
  get at(): number {
    return this.#at;
  }

  /** True once the deadline passed (checked now, on the clock) or was stopped. */
  expired(): boolean {
    if (this.#state === 'live' && this.#init.clock.now() >= this.#at) this.#expire();
    return this.#state !== 'live';
  }

  /** Milliseconds left (0 once expired). */
  remainingMs(): number {
    return this.expired() ? 0 : Math.max(0, this.#at - this.#init.clock.now());
  }

  /**
   * A refresh sent at `sentAt` was acknowledged with `ttlMs` left: the deadline moves forward to
   * `sentAt + ttlMs − margin`. Returns false when the lease had already expired (or does now).
   */
  acknowledged(sentAt: number, ttlMs: number): boolean {
    if (this.expired()) return false;
    this.#at = Math.max(this.#at, sentAt + ttlMs - this.#init.safetyMarginMs);
    return !this.expired();
  }

  /** Stops the timer without firing (the lease ended another way). Idempotent. */
  stop(): void {
    if (this.#state === 'live') this.#state = 'stopped';
    clearTimeout(this.#timer);
  }

  #expire(): void {
    this.#state = 'expired';
    clearTimeout(this.#timer);
    this.#init.onExpire(this.#init.clock.now() - this.#at);
  }

  // One timer; when it fires early (the deadline moved on), it re-arms for the rest.
  #arm(): void {
    if (this.expired()) return;
    const wait = Math.min(MAX_TIMER_MS, Math.max(0, this.#at - this.#init.clock.now()) + 1);
    this.#timer = setTimeout(() => this.#arm(), wait);
    this.#timer.unref();
  }
}
