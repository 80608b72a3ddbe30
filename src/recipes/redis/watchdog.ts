import type { Clock } from '../../core/clock.js';
import { LocalDeadline } from '../../core/deadline.js';
import { LeaseLostError, type LeaseLostReason } from '../../core/errors.js';
import { RENEW, runScript } from './scripts.js';
import type { RedisClient } from './client.js';

export interface WatchdogInit {
  redis: RedisClient;
  name: string;
  lockKey: string;
  /** The lock key's value while held (owner check for renew). */
  value: string;
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
 * token-checked `PEXPIRE` every TTL/3 and keeps the local deadline (core's LocalDeadline: send
 * time of the last acknowledged renew + TTL − margin). Redis applied that TTL no earlier than the
 * send, so the deadline passes strictly before the store can hand the lock to someone else.
 * `signal` aborts at once when a renew fails, is refused, or is late (the deadline passes first);
 * the watchdog then stops for good and never re-acquires.
 */
export class RenewWatchdog {
  readonly #abort = new AbortController();
  readonly #init: WatchdogInit;
  readonly #deadline: LocalDeadline;
  #timer: NodeJS.Timeout | undefined;
  #stopped = false;

  constructor(init: WatchdogInit) {
    this.#init = init;
    this.#deadline = new LocalDeadline({ clock: init.clock, safetyMarginMs: init.safetyMarginMs, onExpire: () => this.#end('deadline') }, init.sentAt, init.ttlMs);
    this.#schedule(init.sentAt);
  }

  /** Aborts (with a {@link LeaseLostError}) when the lease is lost or may be lost. */
  get signal(): AbortSignal {
    return this.#abort.signal;
  }

  /** The local deadline, in the clock's milliseconds. */
  get deadline(): number {
    return this.#deadline.at;
  }

  /**
   * Stops renewing without reporting a loss: the holder is releasing (its lease has already
   * detached from this signal, so the signal is left as it is).
   */
  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#timer);
    this.#deadline.stop();
  }

  #end(reason: LeaseLostReason, cause?: unknown): void {
    if (this.#stopped || this.#abort.signal.aborted) return;
    clearTimeout(this.#timer);
    this.#deadline?.stop(); // (undefined when the grant was already past its deadline)
    const { name, fence } = this.#init;
    const message =
      reason === 'deadline'
        ? `${name}: no renew acknowledged before the local lease deadline`
        : reason === 'expired'
          ? `${name}: the lock is no longer held by this lease at Redis`
          : `${name}: renew failed`;
    this.#abort.abort(new LeaseLostError(reason, message, { cause, fence }));
    this.#init.onLost?.(reason);
  }

  #schedule(lastSentAt: number): void {
    if (this.#stopped || this.#abort.signal.aborted) return;
    const wait = lastSentAt + this.#init.ttlMs / 3 - this.#init.clock.now();
    this.#timer = setTimeout(() => void this.#renew(), Math.max(0, wait));
  }

  async #renew(): Promise<void> {
    const { redis, lockKey, value, ttlMs, clock } = this.#init;
    if (this.#stopped || this.#deadline.expired()) return;
    const sentAt = clock.now();
    let reply: unknown;
    try {
      reply = await runScript(redis, RENEW, [lockKey], [value, ttlMs]);
    } catch (e) {
      return this.#end('renew-failed', e);
    }
    if (this.#stopped || this.#abort.signal.aborted) return; // late: never revive
    if (reply !== 1) return this.#end('expired');
    if (!this.#deadline.acknowledged(sentAt, ttlMs)) return;
    this.#schedule(sentAt);
  }
}
