import pg from 'pg';
import { DEFAULT_NAMESPACE } from '../../src/recipes/postgres/index.js';
import { PostgresServer, type FaultProxy } from '../../src/testing/index.js';
import { ProxiedStore, storeRestart } from './types.js';

/**
 * One Postgres server. `synchronous_commit` is on (the kit's default is off, for speed): a
 * crashed server with asynchronous commit may lose the last WAL of `tenure_fence_seq` and hand
 * out a fence again, which is a property of that setting, not of the locks under test.
 */
export class PostgresStore extends ProxiedStore {
  readonly backend = 'postgres';
  readonly name = 'chaos-leader';
  readonly #server: PostgresServer;
  readonly faults;

  constructor(server = new PostgresServer({ settings: { synchronous_commit: 'on' } })) {
    super(server);
    this.#server = server;
    this.faults = [storeRestart('store-restart', (hard) => server.restart({ hard }), false)];
  }

  protected ports(): number[] {
    return [this.#server.port];
  }

  protected via(proxies: readonly FaultProxy[]) {
    return { backend: 'postgres' as const, host: proxies[0]!.host, port: proxies[0]!.port };
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
}
