import { atMostMs } from '../../core/abort.js';
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
  /** Called once, with the signal's reason, when the watchdog ends for any reason but `stop()`. */
  onLost?: (error: LeaseLostError) => void;
}

/**
 * The renew watchdog: the one owner of a Redis lease's liveness (its "session"). It renews with a
 * token-checked `PEXPIRE` every TTL/3 and keeps the local deadline (core's LocalDeadline: send
 * time of the last acknowledged renew + TTL − margin). Redis applied that TTL no earlier than the
 * send, so the deadline passes strictly before the store can hand the lock to someone else.
 * `signal` aborts at once when a renew fails, is refused, or is late (the deadline passes first);
 * the watchdog then stops for good and never re-acquires.
 *
 * A lock's cycle is often shorter than TTL/3, so what the watchdog makes per lease is made late:
 * the signal when first read (a lock hears the end through `onLost`, as LeaseController makes its
 * own signal), and the deadline's timer when the first renew is sent. Until then the renew timer
 * fires first (TTL/3 < TTL − margin), and a renew past the deadline (an event loop held up) ends
 * the lease on the synchronous check before it sends; `lost` checks read the deadline itself.
 */
export class RenewWatchdog {
  #abort: AbortController | undefined;
  /** The signal's reason, once lost. */
  #lost: LeaseLostError | undefined;
  readonly #init: WatchdogInit;
  readonly #deadline: LocalDeadline;
  /** Cancels the pending renew. */
  #cancel: (() => void) | undefined;
  #stopped = false;

  constructor(init: WatchdogInit) {
    this.#init = init;
    this.#deadline = new LocalDeadline({ clock: init.clock, safetyMarginMs: init.safetyMarginMs, onExpire: () => this.#end('deadline') }, init.sentAt, init.ttlMs, { armed: false });
    this.#schedule(init.sentAt);
  }

  /** Aborts (with a {@link LeaseLostError}) when the lease is lost or may be lost. */
  get signal(): AbortSignal {
    if (!this.#abort) {
      this.#abort = new AbortController();
      if (this.#lost) this.#abort.abort(this.#lost);
    }
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
    this.#cancel?.();
    this.#deadline.stop();
  }

  #end(reason: LeaseLostReason, cause?: unknown): void {
    if (this.#stopped || this.#lost) return;
    this.#cancel?.();
    this.#deadline.stop();
    const { name, fence } = this.#init;
    const message =
      reason === 'deadline'
        ? `${name}: no renew acknowledged before the local lease deadline`
        : reason === 'expired'
          ? `${name}: the lock is no longer held by this lease at Redis`
          : `${name}: renew failed`;
    const lost = (this.#lost = new LeaseLostError(reason, message, { cause, fence }));
    this.#abort?.abort(lost);
    this.#init.onLost?.(lost);
  }

  #schedule(lastSentAt: number): void {
    if (this.#stopped || this.#lost) return;
    const at = lastSentAt + this.#init.ttlMs / 3;
    // On a shared timer, which may fire up to 1/8 of the wait early (then it waits out the rest):
    // a lock's cycle is often over long before its first renew, and a Node timer of its own was
    // made and dropped with every cycle.
    const due = (): void => {
      const rest = at - this.#init.clock.now();
      if (rest > 0) this.#cancel = atMostMs(rest, due);
      else void this.#renew();
    };
    this.#cancel = atMostMs(at - this.#init.clock.now(), due);
  }

  async #renew(): Promise<void> {
    const { redis, lockKey, value, ttlMs, clock } = this.#init;
    if (this.#stopped || this.#deadline.expired()) return;
    this.#deadline.arm(); // (idempotent) fires while this renew, or a later one, is in flight
    const sentAt = clock.now();
    let reply: unknown;
    try {
      reply = await runScript(redis, RENEW, [lockKey], [value, ttlMs]);
    } catch (e) {
      return this.#end('renew-failed', e);
    }
    if (this.#stopped || this.#lost) return; // late: never revive
    if (reply !== 1) return this.#end('expired');
    if (!this.#deadline.acknowledged(sentAt, ttlMs)) return;
    this.#schedule(sentAt);
  }
}
