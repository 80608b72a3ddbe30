import type { RedisClient } from './client.js';
import { SharedSubscriber, type Subscription } from './subscriber.js';

/**
 * Hints for observers that a lock's holder may have changed: a subscription to the lock's grant
 * and release channels. Observers still re-read on an interval, since a lease that
 * simply expires announces nothing.
 */
export class ChangeFeed {
  readonly #sub: Subscription;
  readonly #ready: Promise<unknown>;
  #wake: (() => void) | undefined;
  #pending = false;

  constructor(redis: RedisClient, channels: string[]) {
    // On the client's one shared subscriber connection (see subscriber.ts); the interval covers a gap.
    this.#sub = SharedSubscriber.for(redis).subscribe(channels, () => {
      this.#pending = true;
      this.#wake?.();
    });
    this.#ready = this.#sub.ready.catch(() => undefined);
  }

  /** Resolves at the next message (at once if one came since the last call), after `ms`, or on abort. */
  async next(ms: number, signal: AbortSignal): Promise<void> {
    await this.#ready;
    if (signal.aborted) return;
    if (this.#pending) {
      this.#pending = false;
      return;
    }
    await new Promise<void>((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        signal.removeEventListener('abort', done);
        this.#wake = undefined;
        this.#pending = false;
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.#wake = done;
      signal.addEventListener('abort', done, { once: true });
    });
  }

  close(): void {
    this.#sub.close();
  }
}
