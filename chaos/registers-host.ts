import { join } from 'node:path';
import { Redis } from 'ioredis';
import pg from 'pg';
import { PostgresServer, RedisServer, spawnWorker, type RegisterEntry, type WorkerHandle } from '../src/testing/index.js';
import { REGISTER, type RegisterEndpoints } from './worker/registers.js';

const registerProcess = new URL('./register-process.ts', import.meta.url).pathname;

/**
 * The registers' servers: a Redis and a Postgres of their own (never faulted) and the in-memory
 * register's process. At the end it reads each register's own log of accepted writes.
 */
export class RegisterHost {
  readonly #redis = new RedisServer();
  readonly #pg = new PostgresServer();
  #memory: WorkerHandle | undefined;
  #socket = '';

  async start(dir: string): Promise<void> {
    this.#socket = join(dir, 'memory-register.sock');
    const [, , memory] = await Promise.all([this.#redis.start(), this.#pg.start(), spawnWorker(registerProcess, [this.#socket])]);
    this.#memory = memory;
    await memory.waitFor('ready', { timeoutMs: 60_000 });
    const client = new pg.Client(this.#pg.connectionConfig);
    await client.connect();
    await client.query(`CREATE TABLE ${REGISTER.pgTable} (seq bigserial PRIMARY KEY, write_id text NOT NULL, fence bigint NOT NULL, register text NOT NULL)`);
    await client.end();
  }

  get endpoints(): RegisterEndpoints {
    return { memory: this.#socket, redis: this.#redis.endpoint, postgres: { host: this.#pg.host, port: this.#pg.port } };
  }

  /** Each register's log of accepted writes, in the order it accepted them (a shard's register is `<kind>/<shard>`). */
  async logs(): Promise<Record<string, RegisterEntry[]>> {
    const memory = this.#memory!;
    const from = memory.events.length;
    memory.send({ cmd: 'log' });
    const mem = await memory.waitFor<{ logs: Record<string, RegisterEntry[]> }>('log', { from, timeoutMs: 30_000 });
    const out: Record<string, RegisterEntry[]> = { memory: [], redis: [], postgres: [], ...mem.data.logs };
    const redis = new Redis({ ...this.#redis.endpoint, lazyConnect: true });
    await redis.connect();
    for (const key of await redis.keys(`${REGISTER.redisLog}*`)) {
      const shard = key.slice(REGISTER.redisLog.length + 1);
      out[shard === '' ? 'redis' : `redis/${shard}`] = (await redis.lrange(key, 0, -1)).map((e) => {
        const i = e.lastIndexOf('|');
        return { id: e.slice(0, i), fence: BigInt(e.slice(i + 1)) };
      });
    }
    redis.disconnect();
    const client = new pg.Client(this.#pg.connectionConfig);
    await client.connect();
    const rows = (await client.query(`SELECT write_id, fence::text AS fence, register FROM ${REGISTER.pgTable} ORDER BY seq`)).rows as { write_id: string; fence: string; register: string }[];
    await client.end();
    for (const r of rows) (out[r.register] ??= []).push({ id: r.write_id, fence: BigInt(r.fence) });
    return out;
  }

  async stop(): Promise<void> {
    await Promise.all([this.#memory?.kill(), this.#redis.stop(), this.#pg.stop()]);
  }
}
