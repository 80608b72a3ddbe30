import type { RedisClient } from './client.js';
import { SharedSubscriber, type Subscription } from './subscriber.js';

/**
 * Wakes waiting acquires when the holder releases. The release script publishes, on the name's
 * channel, the token of the waiter at the head of the queue (empty when nobody queues); this
 * listener (on the client's one shared subscriber connection, subscribed on the first wait) wakes that waiter only,
 * or every waiter for an empty message. Polling with jitter stays as the fallback, so a message
 * lost in a reconnect, or addressed to a waiter that died, only costs the poll interval.
 *
 * It also tells the holder when a grant goes to another token on the name's lost channel
 * (subscribed before the first acquire). Two subscriptions, not one: a lock that never waits is
 * never sent the release messages of its own cycles.
 */
export class ReleaseListener {
  /** The holder of this lock object, told when a grant goes to another token. */
  #holder: { token: string; lost: () => void } | undefined;
  /** The release channel, for waits. */
  readonly #releases: OnceSubscription;
  /** The lost channel, for the holder. */
  readonly #lost: OnceSubscription;
  /** Pending waits: token → wake functions. */
  readonly #waiters = new Map<string, Set<() => void>>();
  /** Messages addressed to everyone. */
  #broadcasts = 0;
  /** Messages addressed to a token with a wait in progress (removed by `forget`). */
  readonly #addressed = new Map<string, number>();

  constructor(redis: RedisClient, channel: string, lost: string) {
    this.#releases = new OnceSubscription(redis, channel, (to) => this.#deliver(to));
    this.#lost = new OnceSubscription(redis, lost, (to) => {
      if (this.#holder && to !== this.#holder.token) this.#holder.lost();
    });
  }

  /**
   * While this lock object holds with `token`, calls `lost` when the lock is granted to another
   * token (its key was deleted or expired under it). Undo with `unwatch()`.
   */
  watchHolder(token: string, lost: () => void): void {
    this.#holder = { token, lost };
    this.holderReady()?.catch(() => undefined);
  }

  /**
   * Subscribes (once) to the lost channel the holder hears on: undefined when it is already in
   * place (nothing to wait for, in every cycle but the first), else the promise to await before
   * the first attempt.
   */
  holderReady(): Promise<void> | undefined {
    return this.#lost.subscribed ? undefined : this.#lost.ready();
  }

  /** True once the release channel is subscribed (see `ready`). */
  get subscribed(): boolean {
    return this.#releases.subscribed;
  }

  unwatch(token: string): void {
    if (this.#holder?.token === token) this.#holder = undefined;
  }

  /**
   * Subscribes (once) to the release channel. A waiter tries again once it is in place: a release
   * before that is seen by that attempt.
   */
  ready(): Promise<void> {
    return this.#releases.ready();
  }

  #deliver(to: string): void {
    if (to === '') {
      this.#broadcasts++;
      for (const set of [...this.#waiters.values()]) for (const w of [...set]) w();
      return;
    }
    if (this.#addressed.has(to)) this.#addressed.set(to, (this.#addressed.get(to) ?? 0) + 1);
    for (const w of [...(this.#waiters.get(to) ?? [])]) w();
  }

  /**
   * A stamp of the messages `token` has been sent so far. Take it before an attempt and pass it
   * to `wait`: a release that arrives while the attempt's reply is on its way is then not missed.
   */
  seen(token: string): string {
    // Before the release channel is subscribed no message can arrive, and the first wait
    // subscribes and tries again before it waits: every uncontended acquire ends here, with no
    // per-token count to make and drop.
    if (!this.#releases.subscribed) return '';
    if (!this.#addressed.has(token)) this.#addressed.set(token, 0);
    return `${this.#broadcasts}/${this.#addressed.get(token)}`;
  }

  /** Drops the per-token count once a wait is over. */
  forget(token: string): void {
    if (this.#addressed.size > 0) this.#addressed.delete(token);
  }

  /**
   * Resolves on the next release message for `token` (at once if one arrived since `seen`),
   * after `ms`, or when `signal` aborts. Never rejects.
   */
  wait(token: string, seen: string, ms: number, signal?: AbortSignal): Promise<void> {
    if (signal?.aborted || this.seen(token) !== seen) return Promise.resolve();
    return new Promise<void>((resolve) => {
      let set = this.#waiters.get(token);
      if (!set) this.#waiters.set(token, (set = new Set()));
      const waiters = set;
      const done = (): void => {
        clearTimeout(timer);
        waiters.delete(done);
        if (waiters.size === 0 && this.#waiters.get(token) === waiters) this.#waiters.delete(token);
        signal?.removeEventListener('abort', done);
        resolve();
      };
      const timer = setTimeout(done, Math.max(0, ms));
      waiters.add(done);
      signal?.addEventListener('abort', done, { once: true });
    });
  }

  /** Closes the subscriber connection. */
  async close(): Promise<void> {
    this.#holder = undefined;
    for (const set of [...this.#waiters.values()]) for (const w of [...set]) w();
    this.#releases.close();
    this.#lost.close();
  }
}

/**
 * One channel on the client's one shared subscriber connection (see subscriber.ts), subscribed
 * on the first `ready()`; a subscribe that fails is dropped, so the next `ready()` tries again.
 */
class OnceSubscription {
  #sub: Subscription | undefined;
  #ready: Promise<void> | undefined;
  /** True once subscribed (until `close`). */
  subscribed = false;

  constructor(
    private readonly redis: RedisClient,
    private readonly channel: string,
    private readonly onMessage: (message: string) => void,
  ) {}

  ready(): Promise<void> {
    if (!this.#ready) {
      const sub = SharedSubscriber.for(this.redis).subscribe([this.channel], (_channel, message) => this.onMessage(message));
      this.#sub = sub;
      this.#ready = sub.ready.then(() => void (this.subscribed = true));
      this.#ready.catch(() => {
        this.#ready = undefined;
        sub.close();
      });
    }
    return this.#ready;
  }

  close(): void {
    const sub = this.#sub;
    this.#sub = this.#ready = undefined;
    this.subscribed = false;
    sub?.close();
  }
}
