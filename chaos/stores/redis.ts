import { Redis } from 'ioredis';
import { RedisServer, type FaultProxy } from '../../src/testing/index.js';
import { ProxiedStore, storeRestart } from './types.js';

/** One Redis server without persistence: a restart loses every lock, lease and fence counter. */
export class RedisStore extends ProxiedStore {
  readonly backend = 'redis';
  readonly name = 'chaos-leader';
  readonly #server: RedisServer;
  readonly faults;

  constructor(server = new RedisServer()) {
    super(server);
    this.#server = server;
    this.faults = [storeRestart('store-restart', (hard) => server.restart({ hard }))];
  }

  protected ports(): number[] {
    return [this.#server.port];
  }

  protected via(proxies: readonly FaultProxy[]) {
    return { backend: 'redis' as const, host: proxies[0]!.host, port: proxies[0]!.port };
  }

  async leftovers(): Promise<string[]> {
    const redis = new Redis({ host: this.#server.host, port: this.#server.port, lazyConnect: true });
    try {
      await redis.connect();
      // The election's lock key, or the shard kind's: every shard's lock and every member's key.
      const keys = [...(await redis.keys(`tenure:lock:{${this.name}*`)), ...(await redis.keys(`tenure:member:{${this.name}*`))];
      return Promise.all(keys.map(async (key) => `key ${key} (held by ${await redis.get(key)})`));
    } finally {
      redis.disconnect();
    }
  }
}
