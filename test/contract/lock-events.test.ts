import { EventEmitter } from 'eventemitter3';
import pg from 'pg';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TenureError, type Lease, type LeaseEvents } from '../../src/index.js';
import { createEtcdClient, EtcdMutex, EtcdSession } from '../../src/recipes/etcd/index.js';
import { PgSessionLock } from '../../src/recipes/postgres/index.js';
import { RedisLock } from '../../src/recipes/redis/index.js';
import { InterProcessMutex, InterProcessSemaphoreV2, ZkSession } from '../../src/recipes/zk/index.js';
import { EtcdServer, FaultProxy, PostgresServer, RedisServer, ZooKeeperServer } from '../../src/testing/index.js';
import { pollValue } from '../helpers/wait.js';

/**
 * Every lock has the candidates' events (test/contract/candidate.ts): the same names and the same
 * order for the same story on all four backends, because each is the lease's own story.
 */

interface Lock {
  acquire(options?: { timeoutMs?: number }): Promise<Lease>;
  tryAcquire(options?: { timeoutMs?: number }): Promise<Lease | undefined>;
  close(): Promise<void>;
}

let etcd: EtcdServer;
let zk: ZooKeeperServer;
let redisServer: RedisServer;
let postgres: PostgresServer;
let etcdSession: EtcdSession;
/** A second session: one etcd session holds one place per name. */
let etcdSession2: EtcdSession;
let etcdClient: Awaited<ReturnType<typeof createEtcdClient>>;
let zkSession: ZkSession;
let redis: Redis;
let pool: pg.Pool;

beforeAll(async () => {
  [etcd, zk, redisServer, postgres] = await Promise.all([new EtcdServer().start(), new ZooKeeperServer().start(), new RedisServer().start(), new PostgresServer().start()]);
  etcdClient = await createEtcdClient({ hosts: etcd.endpoints });
  [etcdSession, etcdSession2] = await Promise.all([EtcdSession.create({ client: etcdClient, ttlMs: 3000 }), EtcdSession.create({ client: etcdClient, ttlMs: 3000 })]);
  zkSession = await ZkSession.create({ connectionString: zk.connectionString, ttlMs: 3000 });
  redis = new Redis({ host: '127.0.0.1', port: redisServer.port, maxRetriesPerRequest: 1 });
  redis.on('error', () => undefined);
  pool = new pg.Pool({ ...postgres.connectionConfig, max: 4 });
  pool.on('error', () => undefined);
});
afterAll(async () => {
  await Promise.all([etcdSession?.close(), etcdSession2?.close()]);
  etcdClient?.close();
  await zkSession?.close();
  redis?.disconnect();
  await pool?.end();
  await Promise.all([etcd?.stop(), zk?.stop(), redisServer?.stop(), postgres?.stop()]);
});

const locks: Record<string, (name: string, second?: boolean) => Lock> = {
  etcd: (name, second) => new EtcdMutex(second ? etcdSession2 : etcdSession, name),
  ZooKeeper: (name) => new InterProcessMutex(zkSession, `/${name}`),
  Redis: (name) => new RedisLock(redis, name, { ttlMs: 3000, restartGuardMs: 0 }),
  Postgres: (name) => new PgSessionLock(pool, name),
};

/** The events `target` fires, as `event n` with n the lease's order of grant. */
function record(target: unknown): string[] {
  const emitter = target as EventEmitter<LeaseEvents>;
  expect(emitter).toBeInstanceOf(EventEmitter);
  const events: string[] = [];
  const leases: Lease[] = [];
  emitter.on('granted', (lease) => {
    leases.push(lease);
    events.push(`granted ${leases.length}`);
  });
  emitter.on('released', (lease) => void events.push(`released ${leases.indexOf(lease) + 1}`));
  emitter.on('lost', (e, lease) => void events.push(`lost ${leases.indexOf(lease) + 1} ${e.reason}`));
  return events;
}

let seq = 0;

describe.each(Object.keys(locks))('lock events: %s', (kind) => {
  it('granted before acquire() resolves, released on release(), the same for tryAcquire() and the end of an await using block; a try that gets nothing fires nothing', async () => {
    const name = `events-${process.pid}-${++seq}`;
    const lock = locks[kind]!(name);
    const other = locks[kind]!(name, true);
    const events = record(lock);
    const first = await lock.acquire({ timeoutMs: 10_000 });
    expect(events).toEqual(['granted 1']);
    await first.release();
    {
      await using held = await lock.tryAcquire({ timeoutMs: 10_000 });
      expect(held).toBeDefined();
      const otherEvents = record(other);
      expect(await other.tryAcquire({ timeoutMs: 10_000 })).toBeUndefined();
      expect(otherEvents).toEqual([]);
    }
    await pollValue(async () => (events.length >= 4 ? true : undefined), 10_000);
    expect(events).toEqual(['granted 1', 'released 1', 'granted 2', 'released 2']);
    await Promise.all([lock.close(), other.close()]);
    expect(events).toHaveLength(4);
  });
});

it('a ZooKeeper semaphore fires granted for each lease it hands out, and released for each', async () => {
  const sem = new InterProcessSemaphoreV2(zkSession, `/events-sem-${process.pid}`, 3);
  const events = record(sem);
  const leases = await sem.acquire(2, { timeoutMs: 10_000 });
  expect(events).toEqual(['granted 1', 'granted 2']);
  await Promise.all(leases.map((l) => l.release()));
  expect(events.slice(2).sort()).toEqual(['released 1', 'released 2']);
  await sem.close();
});

it('an etcd session fires LOST when its lease is revoked from outside, and CONNECTED when a recipe needs a new one', async () => {
  const session = await EtcdSession.create({ client: etcdClient, ttlMs: 3000 });
  const states: string[] = [];
  session.on('state', (s) => states.push(s));
  const named: string[] = [];
  session.on('LOST', () => named.push('LOST'));
  session.on('CONNECTED', () => named.push('CONNECTED'));
  const mutex = new EtcdMutex(session, `events-session-${process.pid}`);
  const events = record(mutex);
  try {
    const held = await mutex.acquire({ timeoutMs: 10_000 });
    await etcdClient.leaseClient.leaseRevoke({ ID: session.leaseId });
    await pollValue(async () => (held.signal.aborted && states.includes('LOST') ? true : undefined), 10_000);
    expect(events).toEqual(['granted 1', 'lost 1 expired']);
    const again = await mutex.acquire({ timeoutMs: 10_000 });
    expect(again.fence).toBeGreaterThan(held.fence);
    expect(states).toEqual(['LOST', 'CONNECTED']);
    expect(named).toEqual(states);
    await again.release();
  } finally {
    await mutex.close();
    await session.close();
  }
  expect(states).toEqual(['LOST', 'CONNECTED']); // close is no loss
});

it("a cleanup no caller awaits that fails (a lost Redis lock released behind a blackholed link) fires error with the lease, beside the logger's warn", async () => {
  const proxy = await new FaultProxy({ target: { port: redisServer.port } }).start();
  const through = new Redis({ host: '127.0.0.1', port: proxy.port, maxRetriesPerRequest: 1 });
  through.on('error', () => undefined);
  const lock = new RedisLock(through, `events-error-${process.pid}`, { ttlMs: 2000, restartGuardMs: 0, callTimeoutMs: 1000 });
  const errors: [unknown, Lease | undefined][] = [];
  lock.on('error', (e, lease) => void errors.push([e, lease]));
  try {
    const held = await lock.acquire({ timeoutMs: 10_000 });
    proxy.blackhole();
    await pollValue(async () => (held.signal.aborted ? true : undefined), 10_000);
    await held.release(); // resolves at once: the cleanup goes on in the background
    const [e, lease] = await pollValue(async () => errors[0], 10_000);
    expect(e).toBeInstanceOf(TenureError);
    expect(lease).toBe(held);
  } finally {
    proxy.heal();
    await lock.close().catch(() => undefined);
    through.disconnect();
    await proxy.stop();
  }
});
