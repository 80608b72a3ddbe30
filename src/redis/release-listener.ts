import type { Redis } from 'ioredis';

/**
 * Wakes waiting acquires when the holder releases: the release script publishes on the name's
 * channel, and this listener (one subscriber connection per lock, opened on the first wait)
 * resolves every pending wait. Polling with jitter stays as the fallback, so a message lost in a
 * reconnect only costs the poll interval.
 */
export class ReleaseListener {
  readonly #redis: Redis;
  readonly #channel: string;
  #sub: Redis | undefined;
  #ready: Promise<void> | undefined;
  readonly #waiters = new Set<() => void>();

  constructor(redis: Redis, channel: string) {
    this.#redis = redis;
    this.#channel = channel;
  }

  /** Subscribes (once). Await before trying to acquire, so no release is missed in between. */
  ready(): Promise<void> {
    if (!this.#ready) {
      const sub = this.#redis.duplicate();
      this.#sub = sub;
      sub.on('error', () => undefined); // reconnects on its own; polling covers the gap
      sub.on('message', (channel: string) => {
        if (channel !== this.#channel) return;
        for (const w of [...this.#waiters]) w();
      });
      this.#ready = sub.subscribe(this.#channel).then(() => undefined);
      this.#ready.catch(() => {
        this.#ready = undefined;
        sub.disconnect();
      });
    }
    return this.#ready;
  }

  /** Resolves on the next release message, after `ms`, or when `signal` aborts (never rejects). */
  wait(ms: number, signal: AbortSignal): Promise<void> {
    if (signal.aborted) return Promise.resolve();
    return new Promise<void>((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        this.#waiters.delete(done);
        signal.removeEventListener('abort', done);
        resolve();
      };
      const timer = setTimeout(done, Math.max(0, ms));
      this.#waiters.add(done);
      signal.addEventListener('abort', done, { once: true });
    });
  }

  /** Closes the subscriber connection. */
  async close(): Promise<void> {
    for (const w of [...this.#waiters]) w();
    const sub = this.#sub;
    this.#sub = undefined;
    this.#ready = undefined;
    if (sub) await sub.quit().catch(() => sub.disconnect());
  }
}
