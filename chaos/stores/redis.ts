import { Redis } from 'ioredis';
import { RedisServer } from '../../src/testing/index.js';
import { ProxySet, storeRestart, type ChaosStore } from './types.js';

/** One Redis server without persistence: a restart loses every lock, lease and fence counter. */
export class RedisStore implements ChaosStore {
  readonly backend = 'redis';
  readonly name = 'chaos-leader';
  readonly #server = new RedisServer();
  readonly #proxies = new ProxySet();
  readonly faults = [storeRestart('store-restart', (hard) => this.#server.restart({ hard }))];

  async start(slots: number): Promise<void> {
    await this.#server.start();
    await this.#proxies.start(slots, [this.#server.port]);
  }

  endpoints(slot: number) {
    const p = this.#proxies.of(slot)[0]!;
    return { backend: 'redis' as const, host: p.host, port: p.port };
  }

  proxies(slot: number) {
    return this.#proxies.of(slot);
  }

  async heal(): Promise<void> {
    this.#proxies.healAll();
    await this.#server.start();
  }

  async leftovers(): Promise<string[]> {
    const redis = new Redis({ host: this.#server.host, port: this.#server.port, lazyConnect: true });
    try {
      await redis.connect();
      const key = `tenure:lock:{${this.name}}`;
      return (await redis.exists(key)) ? [`key ${key} (held by ${await redis.get(key)})`] : [];
    } finally {
      redis.disconnect();
    }
  }

  async stop(): Promise<void> {
    await this.#proxies.stop();
    await this.#server.stop();
  }
}
