import pg from 'pg';
import { DEFAULT_NAMESPACE } from '../../src/recipes/postgres/index.js';
import { PostgresServer } from '../../src/testing/index.js';
import { ProxySet, storeRestart, type ChaosStore } from './types.js';

/**
 * One Postgres server. `synchronous_commit` is on (the kit's default is off, for speed): a
 * crashed server with asynchronous commit may lose the last WAL of `tenure_fence_seq` and hand
 * out a fence again, which is a property of that setting, not of the locks under test.
 */
export class PostgresStore implements ChaosStore {
  readonly backend = 'postgres';
  readonly name = 'chaos-leader';
  readonly #server = new PostgresServer({ settings: { synchronous_commit: 'on' } });
  readonly #proxies = new ProxySet();
  readonly faults = [storeRestart('store-restart', (hard) => this.#server.restart({ hard }), false)];

  async start(slots: number): Promise<void> {
    await this.#server.start();
    await this.#proxies.start(slots, [this.#server.port]);
  }

  endpoints(slot: number) {
    const p = this.#proxies.of(slot)[0]!;
    return { backend: 'postgres' as const, host: p.host, port: p.port };
  }

  proxies(slot: number) {
    return this.#proxies.of(slot);
  }

  async heal(): Promise<void> {
    this.#proxies.healAll();
    await this.#server.start();
  }

  async leftovers(): Promise<string[]> {
    const client = new pg.Client(this.#server.connectionConfig);
    await client.connect();
    try {
      const r = await client.query(
        "SELECT pid, granted, objid::int8 AS key FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 2 AND classid::int8 = $1",
        [DEFAULT_NAMESPACE],
      );
      return r.rows.map((x: { pid: number; granted: boolean; key: string }) => `advisory lock ${x.key} ${x.granted ? 'held' : 'awaited'} by backend ${x.pid}`);
    } finally {
      await client.end();
    }
  }

  async stop(): Promise<void> {
    await this.#proxies.stop();
    await this.#server.stop();
  }
}
