import { connect, type Socket } from 'node:net';
import { Redis } from 'ioredis';
import pg from 'pg';
import { StaleFenceError } from '../../src/index.js';
import { RedisFencedResource } from '../../src/recipes/redis/index.js';
import { PostgresFencedResource } from '../../src/recipes/postgres/index.js';

/**
 * The registers a candidate writes to, one per fenced resource tenure ships: the in-memory one
 * in its own process (reached over a Unix socket), Redis and Postgres, each on a server of its
 * own that the nemesis leaves alone (a register that loses its data proves nothing about locks).
 * Each write appends its id to the register's own log, atomically with the fence check, so the
 * checker can see what was accepted and in which order. With `bypass` the fence check is skipped
 * (the proof that the checker can fail).
 */
export interface RegisterEndpoints {
  memory: string;
  redis: { host: string; port: number };
  postgres: { host: string; port: number };
}

export interface Register {
  readonly name: string;
  /** Writes `id` with `fence`; with `shard`, to that shard's own register (`<name>/<shard>`, its own fence and log). */
  write(id: string, fence: bigint, shard?: number): Promise<void>;
  close(): Promise<void>;
}

/** The name a register has in the history and in the logs: `<kind>`, or `<kind>/<shard>` for a shard's. */
export const registerName = (kind: string, shard?: number): string => (shard === undefined ? kind : `${kind}/${shard}`);

/** Keys and table of the registers' logs (the runner reads them back). */
export const REGISTER = {
  redisFence: 'chaos:register:fence',
  redisLog: 'chaos:register:log',
  pgResource: 'chaos-register',
  pgTable: 'chaos_register_log',
} as const;

function memoryRegister(path: string, bypass: boolean): Register {
  let sock: Socket | undefined;
  let buf = '';
  let seq = 0;
  const pending = new Map<number, { resolve: () => void; reject: (e: unknown) => void; fence: bigint }>();
  const fail = (e: Error): void => {
    for (const p of pending.values()) p.reject(e);
    pending.clear();
    sock = undefined;
  };
  const open = (): Socket => {
    if (sock) return sock;
    const s = connect(path);
    s.setEncoding('utf8');
    s.on('data', (d: string) => {
      buf += d;
      for (let i = buf.indexOf('\n'); i >= 0; i = buf.indexOf('\n')) {
        const m = JSON.parse(buf.slice(0, i)) as { seq: number; ok: boolean; highest?: string };
        buf = buf.slice(i + 1);
        const p = pending.get(m.seq);
        pending.delete(m.seq);
        if (!p) continue;
        if (m.ok) p.resolve();
        else p.reject(new StaleFenceError(p.fence, BigInt(m.highest ?? '0'), 'memory'));
      }
    });
    s.on('error', (e) => fail(e));
    s.on('close', () => fail(new Error('memory register: connection closed')));
    sock = s;
    return s;
  };
  return {
    name: 'memory',
    write: (id, fence, shard) =>
      new Promise<void>((resolve, reject) => {
        const n = ++seq;
        pending.set(n, { resolve, reject, fence });
        open().write(`${JSON.stringify({ seq: n, id, fence: fence.toString(), bypass, register: registerName('memory', shard) })}\n`);
      }),
    async close() {
      sock?.end();
    },
  };
}

function redisRegister(at: { host: string; port: number }, bypass: boolean): Register {
  const redis = new Redis({ host: at.host, port: at.port });
  redis.on('error', () => undefined);
  const resources = new Map<number | undefined, RedisFencedResource>();
  const suffix = (shard?: number): string => (shard === undefined ? '' : `:${shard}`);
  return {
    name: 'redis',
    async write(id, fence, shard) {
      const entry = `${id}|${fence}`;
      const log = REGISTER.redisLog + suffix(shard);
      let resource = resources.get(shard);
      if (!resource) resources.set(shard, (resource = new RedisFencedResource(redis, REGISTER.redisFence + suffix(shard))));
      if (bypass) await redis.rpush(log, entry);
      else await resource.write(fence, (w) => w.rpush(log, entry));
    },
    async close() {
      redis.disconnect();
    },
  };
}

function postgresRegister(at: { host: string; port: number }, bypass: boolean): Register {
  const pool = new pg.Pool({ host: at.host, port: at.port, user: 'postgres', database: 'postgres', max: 2 });
  pool.on('error', () => undefined);
  const resources = new Map<number | undefined, PostgresFencedResource>();
  const insert = `INSERT INTO ${REGISTER.pgTable} (write_id, fence, register) VALUES ($1, $2, $3)`;
  return {
    name: 'postgres',
    async write(id, fence, shard) {
      const name = registerName('postgres', shard);
      let resource = resources.get(shard);
      if (!resource) resources.set(shard, (resource = new PostgresFencedResource(pool, shard === undefined ? REGISTER.pgResource : `${REGISTER.pgResource}/${shard}`)));
      if (bypass) await pool.query(insert, [id, fence.toString(), name]);
      else await resource.write(fence, (tx) => tx.query(insert, [id, fence.toString(), name]));
    },
    close: () => pool.end(),
  };
}

export function openRegisters(at: RegisterEndpoints, bypass: boolean): Register[] {
  return [memoryRegister(at.memory, bypass), redisRegister(at.redis, bypass), postgresRegister(at.postgres, bypass)];
}
