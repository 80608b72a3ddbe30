/**
 * The lifecycle manager on each backend (issue 10), as a user sees it:
 * - failover: two manager processes on one name; SIGKILL the leader; time until the other's
 *   `onElected` runs (shared monotonic clock), as ms and as a multiple of the TTL (target: median
 *   ≤ TTL + 150 ms);
 * - demotion latency: a leader's lease ended from outside (etcd lease revoked, ZooKeeper node
 *   deleted, Redis key deleted, Postgres backend terminated); time from that act to the term's
 *   signal aborting, and to `onDemoted` (after the drain and the release).
 * Three rounds each; the median is the row, the spread in the notes.
 */
import { performance } from 'node:perf_hooks';
import { Redis } from 'ioredis';
import pg from 'pg';
import zookeeper from 'node-zookeeper-client';
import { LeadershipManager, type Candidate } from '../src/index.js';
import { EtcdServer, PostgresServer, RedisServer, ZooKeeperServer, spawnWorker, type WorkerHandle } from '../src/testing/index.js';
import { EtcdElection, EtcdSession, createEtcdClient } from '../src/recipes/etcd/index.js';
import { LeaderLatch, ZkSession } from '../src/recipes/zk/index.js';
import { RedisElection } from '../src/recipes/redis/index.js';
import { PgElection, advisoryKey } from '../src/recipes/postgres/index.js';
import { percentile, type BenchCase, type BenchRow } from './harness.js';

const TTL_MS = 2000;
const ROUNDS = 3;
const fixture = new URL('../test/lifecycle/fixtures/manager.ts', import.meta.url).pathname;
let seq = 0;

type Backend = 'etcd' | 'zk' | 'redis' | 'postgres';
interface Store {
  endpoint: string;
  stop(): Promise<void>;
}

async function store(b: Backend): Promise<Store> {
  if (b === 'etcd') {
    const s = await new EtcdServer().start();
    return { endpoint: `127.0.0.1:${s.clientPort}`, stop: () => s.stop() };
  }
  const s = b === 'zk' ? await new ZooKeeperServer().start() : b === 'redis' ? await new RedisServer().start() : await new PostgresServer().start();
  return { endpoint: `127.0.0.1:${s.port}`, stop: () => s.stop() };
}

async function failoverOnce(b: Backend, s: Store): Promise<number> {
  const name = `bench-lc-${process.pid}-${++seq}`;
  const spawn = (id: string): Promise<WorkerHandle> => spawnWorker(fixture, [], { env: { PLAN: JSON.stringify({ backend: b, endpoint: s.endpoint, name, id, ttlMs: TTL_MS }) } });
  const leader = await spawn('leader');
  const follower = await (async () => {
    await leader.waitFor('elected', { timeoutMs: 30_000 });
    const f = await spawn('follower');
    await f.waitFor('ready', { timeoutMs: 30_000 });
    return f;
  })();
  try {
    await new Promise((r) => setTimeout(r, 500));
    const killedAt = process.hrtime.bigint();
    await leader.kill();
    const next = await follower.waitFor('elected', { timeoutMs: 30_000 });
    return Number(next.t - killedAt) / 1e6;
  } finally {
    await Promise.all([leader.kill(), follower.kill()]);
  }
}

/** A candidate in this process, and how to end its term from outside. */
async function inProcess(b: Backend, s: Store): Promise<{ candidate: Candidate; loseFromOutside(fence: bigint): Promise<void>; close(): Promise<void> }> {
  const name = `bench-loss-${process.pid}-${++seq}`;
  const [host, port] = s.endpoint.split(':') as [string, string];
  if (b === 'etcd') {
    const client = await createEtcdClient({ hosts: [`http://${s.endpoint}`] });
    const session = await EtcdSession.create({ client, ttlMs: TTL_MS });
    return {
      candidate: new EtcdElection(session, name, { id: 'x' }),
      loseFromOutside: async () => void (await client.leaseClient.leaseRevoke({ ID: session.leaseId })),
      close: async () => {
        await session.close();
        client.close();
      },
    };
  }
  if (b === 'zk') {
    const session = await ZkSession.create({ connectionString: s.endpoint, ttlMs: TTL_MS });
    const latch = new LeaderLatch(session, `/${name}`, { id: 'x' });
    const raw = zookeeper.createClient(s.endpoint, { sessionTimeout: 10_000, retries: 0 });
    await new Promise<void>((r) => {
      raw.once('connected', () => r());
      raw.connect();
    });
    return {
      candidate: latch,
      loseFromOutside: () => new Promise<void>((resolve, reject) => raw.remove(latch.ourPath!, -1, (e) => (e ? reject(e) : resolve()))),
      close: async () => {
        raw.close();
        await session.close();
      },
    };
  }
  if (b === 'redis') {
    const redis = new Redis({ host, port: Number(port) });
    return {
      candidate: new RedisElection(redis, name, { id: 'x', ttlMs: TTL_MS, restartGuardMs: 0, keyPrefix: 'bench:' }),
      loseFromOutside: async () => void (await redis.eval(`return redis.call('UNLINK', KEYS[1])`, 1, `bench:lock:{${name}}`)),
      close: async () => redis.disconnect(),
    };
  }
  const pool = new pg.Pool({ host, port: Number(port), user: 'postgres', database: 'postgres' });
  return {
    candidate: new PgElection(pool, name, { id: 'x', ttlMs: TTL_MS }),
    loseFromOutside: async () => {
      const k = advisoryKey(name);
      const r = await pool.query(`SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 2 AND classid = $1::bigint::oid AND objid = $2::bigint::oid`, [k.namespace >>> 0, k.key >>> 0]);
      for (const row of r.rows as { pid: number }[]) await pool.query('SELECT pg_terminate_backend($1)', [row.pid]);
    },
    close: () => pool.end(),
  };
}

async function demotionOnce(b: Backend, s: Store): Promise<{ abortMs: number; demotedMs: number }> {
  const c = await inProcess(b, s);
  const m = new LeadershipManager(c.candidate, { backoff: { initialMs: 1000, maxMs: 1000 } });
  m.on('error', () => undefined);
  try {
    m.start();
    const ctx = await m.whenElected({ timeoutMs: 30_000 });
    const aborted = new Promise<number>((r) => ctx.signal.addEventListener('abort', () => r(performance.now()), { once: true }));
    const demoted = new Promise<number>((r) => m.once('demoted', () => r(performance.now())));
    const t0 = performance.now();
    await c.loseFromOutside(ctx.fence);
    const [a, d] = await Promise.all([aborted, demoted]);
    return { abortMs: a - t0, demotedMs: d - t0 };
  } finally {
    await m.close();
    await c.close();
  }
}

const med = (xs: number[]): number => percentile(xs, 50);
const f = (n: number): string => n.toFixed(0);

export const cases: BenchCase[] = (['etcd', 'zk', 'redis', 'postgres'] as const).map((b) => ({
  group: `lifecycle ${b}`,
  async run(): Promise<BenchRow[]> {
    const s = await store(b);
    try {
      const failovers: number[] = [];
      const losses: { abortMs: number; demotedMs: number }[] = [];
      for (let r = 0; r < ROUNDS; r++) {
        failovers.push(await failoverOnce(b, s));
        losses.push(await demotionOnce(b, s));
      }
      const fo = med(failovers);
      return [
        { group: `lifecycle ${b}`, scenario: `failover: SIGKILL → next onElected (TTL ${TTL_MS} ms)`, impl: 'tenure LeadershipManager', p50Ms: fo, notes: `${(fo / TTL_MS).toFixed(2)}× TTL; target ≤ TTL + 150 ms: ${fo <= TTL_MS + 150 ? 'met' : 'missed'}; rounds ${failovers.map(f).join('/')} ms` },
        { group: `lifecycle ${b}`, scenario: 'lease ended from outside → term signal aborts', impl: 'tenure LeadershipManager', p50Ms: med(losses.map((l) => l.abortMs)), notes: `rounds ${losses.map((l) => f(l.abortMs)).join('/')} ms` },
        { group: `lifecycle ${b}`, scenario: 'lease ended from outside → onDemoted (drained, released)', impl: 'tenure LeadershipManager', p50Ms: med(losses.map((l) => l.demotedMs)), notes: `rounds ${losses.map((l) => f(l.demotedMs)).join('/')} ms` },
      ];
    } finally {
      await s.stop();
    }
  },
}));
