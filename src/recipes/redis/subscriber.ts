import type { Redis } from 'ioredis';
import type { RedisClient } from './client.js';

type OnMessage = (channel: string, message: string) => void;

/** One subscription of a {@link SharedSubscriber}: ready once every channel is subscribed. */
export interface Subscription {
  readonly ready: Promise<void>;
  close(): void;
}

const shared = new WeakMap<RedisClient, SharedSubscriber>();

/**
 * One subscriber connection per client, shared by every lock, election, observer and membership
 * made on it: each channel is subscribed once, however many listen, and its messages are handed
 * to each listener. A connection per lock (each `duplicate()`d on its first wait) was 10,000
 * connections for 10,000 elections on one client — Redis's default `maxclients`. The connection
 * is opened with the first subscription and closed with the last (an open socket would keep the
 * process alive); ioredis subscribes again by itself after a reconnect.
 */
export class SharedSubscriber {
  readonly #redis: RedisClient;
  #sub: Redis | undefined;
  readonly #listeners = new Map<string, Set<OnMessage>>();
  readonly #subscribed = new Map<string, Promise<void>>();
  #count = 0;

  private constructor(redis: RedisClient) {
    this.#redis = redis;
  }

  /** The client's shared subscriber. */
  static for(redis: RedisClient): SharedSubscriber {
    let s = shared.get(redis);
    if (!s) shared.set(redis, (s = new SharedSubscriber(redis)));
    return s;
  }

  /** Listens on `channels`; `ready` resolves once all are subscribed (rejects when the subscribe fails: call again). */
  subscribe(channels: readonly string[], onMessage: OnMessage): Subscription {
    const sub = (this.#sub ??= this.#open());
    this.#count++;
    for (const ch of channels) {
      let set = this.#listeners.get(ch);
      if (!set) this.#listeners.set(ch, (set = new Set()));
      set.add(onMessage);
    }
    const ready = Promise.all(
      channels.map((ch) => {
        let p = this.#subscribed.get(ch);
        if (!p) {
          p = sub.subscribe(ch).then(() => undefined);
          const mine = p;
          p.catch(() => {
            if (this.#subscribed.get(ch) === mine) this.#subscribed.delete(ch); // the next subscription tries again
          });
          this.#subscribed.set(ch, p);
        }
        return p;
      }),
    ).then(() => undefined);
    let closed = false;
    return {
      ready,
      close: () => {
        if (closed) return;
        closed = true;
        for (const ch of channels) {
          const set = this.#listeners.get(ch);
          set?.delete(onMessage);
          if (set?.size === 0) {
            this.#listeners.delete(ch);
            this.#subscribed.delete(ch);
            if (this.#sub === sub) sub.unsubscribe(ch).catch(() => undefined);
          }
        }
        if (--this.#count === 0) this.#close();
      },
    };
  }

  #open(): Redis {
    const sub = (this.#redis as Redis).duplicate();
    sub.on('error', () => undefined); // reconnects on its own; the callers' polling covers the gap
    sub.on('message', (channel: string, message: string) => {
      for (const f of [...(this.#listeners.get(channel) ?? [])]) f(channel, message);
    });
    return sub;
  }

  #close(): void {
    const sub = this.#sub;
    this.#sub = undefined;
    this.#subscribed.clear();
    // disconnect, not QUIT: a QUIT waits (in ioredis' offline queue) for a server that may be gone.
    sub?.disconnect();
  }
}
