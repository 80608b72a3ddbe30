import type { Clock } from '../../core/clock.js';
import { LeaseLostError, type LeaseLostReason } from '../../core/errors.js';
import { RENEW, runScript, type RedisClient } from './scripts.js';

export interface WatchdogInit {
  redis: RedisClient;
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
  /** When the next renew is due (monotonic ms). */
  #renewAt: number;
  #renewing = false;
  #stopped = false;
  /** One timer for both duties: the next renew and the deadline, whichever comes first. */
  #timer: NodeJS.Timeout | undefined;

  constructor(init: WatchdogInit) {
    this.#init = init;
    this.#deadline = init.sentAt + init.ttlMs - init.safetyMarginMs;
    this.#renewAt = init.sentAt + init.ttlMs / 3;
    this.#arm();
  }

  /** Aborts (with a {@link LeaseLostError}) when the lease is lost or may be lost. */
  get signal(): AbortSignal {
    return this.#abort.signal;
  }

  /** The local deadline, in the clock's milliseconds. */
  get deadline(): number {
    return this.#deadline;
  }

  /**
   * Stops renewing without reporting a loss: the holder is releasing (its lease has already
   * detached from this signal, so the signal is left as it is).
   */
  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#timer);
  }

  #end(reason: LeaseLostReason, cause?: unknown): void {
    if (this.#stopped || this.#abort.signal.aborted) return;
    clearTimeout(this.#timer);
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

  #arm(): void {
    clearTimeout(this.#timer);
    if (this.#stopped || this.#abort.signal.aborted) return;
    const now = this.#init.clock.now();
    if (now >= this.#deadline) return this.#end('deadline');
    const next = this.#renewing ? this.#deadline : Math.min(this.#deadline, this.#renewAt);
    this.#timer = setTimeout(() => this.#tick(), Math.max(0, next - now));
  }

  #tick(): void {
    const now = this.#init.clock.now();
    if (now >= this.#deadline) return this.#end('deadline');
    if (!this.#renewing && now >= this.#renewAt) void this.#renew();
    this.#arm();
  }

  async #renew(): Promise<void> {
    const { redis, lockKey, token, ttlMs, safetyMarginMs, clock } = this.#init;
    const sentAt = clock.now();
    this.#renewing = true;
    let reply: unknown;
    try {
      reply = await runScript(redis, RENEW, [lockKey], [token, ttlMs]);
    } catch (e) {
      return this.#end('renew-failed', e);
    } finally {
      this.#renewing = false;
    }
    if (this.#stopped || this.#abort.signal.aborted) return; // late: never revive
    if (reply !== 1) return this.#end('expired');
    const deadline = sentAt + ttlMs - safetyMarginMs;
    if (clock.now() >= deadline) return this.#end('deadline');
    this.#deadline = deadline;
    this.#renewAt = sentAt + ttlMs / 3;
    this.#arm();
  }
}
