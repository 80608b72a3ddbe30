import type { Redis } from 'ioredis';
import type { Clock } from '../core/clock.js';
import { LeaseLostError, type LeaseLostReason } from '../core/errors.js';
import { RENEW, runScript } from './scripts.js';

export interface WatchdogInit {
  redis: Redis;
  name: string;
  lockKey: string;
  token: string;
  ttlMs: number;
  safetyMarginMs: number;
  /** Monotonic time at which the acquiring script was sent. */
  sentAt: number;
  fence: bigint;
  clock: Clock;
  /** Called once, when the watchdog ends for any reason but `stop()`. */
  onLost?: (reason: LeaseLostReason) => void;
}

/**
 * The renew watchdog: the one owner of a Redis lease's liveness (its "session"). It renews with a
 * token-checked `PEXPIRE` every TTL/3 and keeps the local deadline, on the monotonic clock:
 * `send time of the last acknowledged renew + TTL − safetyMargin`. Redis applied that TTL no
 * earlier than the send, so the deadline passes strictly before the store can hand the lock to
 * someone else. `signal` aborts at once when a renew fails, is refused, or is late (the deadline
 * passes first); the watchdog then stops for good and never re-acquires.
 */
export class RenewWatchdog {
  readonly #abort = new AbortController();
  readonly #init: WatchdogInit;
  #deadline: number;
  #renewTimer: NodeJS.Timeout | undefined;
  #deadlineTimer: NodeJS.Timeout | undefined;

  constructor(init: WatchdogInit) {
    this.#init = init;
    this.#deadline = init.sentAt + init.ttlMs - init.safetyMarginMs;
    this.#armDeadline();
    this.#scheduleRenew(init.sentAt);
  }

  /** Aborts (with a {@link LeaseLostError}) when the lease is lost or may be lost. */
  get signal(): AbortSignal {
    return this.#abort.signal;
  }

  /** The local deadline, in the clock's milliseconds. */
  get deadline(): number {
    return this.#deadline;
  }

  /** Stops renewing without reporting a loss (the holder is releasing). */
  stop(): void {
    this.#end('released', false);
  }

  #end(reason: LeaseLostReason, report: boolean, cause?: unknown): void {
    if (this.#abort.signal.aborted) return;
    clearTimeout(this.#renewTimer);
    clearTimeout(this.#deadlineTimer);
    const { name, fence } = this.#init;
    const message =
      reason === 'deadline'
        ? `${name}: no renew acknowledged before the local lease deadline`
        : reason === 'expired'
          ? `${name}: the lock is no longer held by this lease at Redis`
          : reason === 'renew-failed'
            ? `${name}: renew failed`
            : `${name}: ${reason}`;
    this.#abort.abort(new LeaseLostError(reason, message, { cause, fence }));
    if (report) this.#init.onLost?.(reason);
  }

  #armDeadline(): void {
    clearTimeout(this.#deadlineTimer);
    const wait = this.#deadline - this.#init.clock.now();
    if (wait <= 0) return this.#end('deadline', true);
    this.#deadlineTimer = setTimeout(() => this.#onDeadline(), wait);
  }

  #onDeadline(): void {
    // A timer can fire a hair early relative to the clock; re-check before declaring.
    if (this.#init.clock.now() >= this.#deadline) this.#end('deadline', true);
    else this.#armDeadline();
  }

  #scheduleRenew(lastSentAt: number): void {
    const wait = lastSentAt + this.#init.ttlMs / 3 - this.#init.clock.now();
    this.#renewTimer = setTimeout(() => void this.#renew(), Math.max(0, wait));
  }

  async #renew(): Promise<void> {
    if (this.#abort.signal.aborted) return;
    const { redis, lockKey, token, ttlMs, safetyMarginMs, clock } = this.#init;
    const sentAt = clock.now();
    let reply: unknown;
    try {
      reply = await runScript(redis, RENEW, [lockKey], [token, ttlMs]);
    } catch (e) {
      return this.#end('renew-failed', true, e);
    }
    if (this.#abort.signal.aborted) return; // late: the deadline already ended it; never revive
    if (reply !== 1) return this.#end('expired', true);
    const deadline = sentAt + ttlMs - safetyMarginMs;
    if (clock.now() >= deadline) return this.#end('deadline', true);
    this.#deadline = deadline;
    this.#armDeadline();
    this.#scheduleRenew(sentAt);
  }
}
