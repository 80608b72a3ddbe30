import { rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bindLeader, ConfigError, InMemoryFencedResource, Leader, LeadershipManager, ShardManager, shutdownOnSignals } from '../../src/index.js';
import { leadershipModule } from '../../src/integrations/inversify/index.js';
import { LeadershipHealthIndicator, LeadershipService, TenureModule } from '../../src/integrations/nestjs/index.js';
import { TenureMetrics } from '../../src/integrations/metrics/index.js';
import { EtcdElection, EtcdMembership, EtcdMutex, EtcdSession, createEtcdClient } from '../../src/recipes/etcd/index.js';
import { InterProcessMutex, InterProcessReadWriteLock, InterProcessSemaphoreV2, LeaderLatch, ZkMembership, ZkSession } from '../../src/recipes/zk/index.js';
import { RedisElection, RedisFencedResource, RedisLock, RedisMembership } from '../../src/recipes/redis/index.js';
import { GRANTS_SQL, PgElection, PgMembership, PgSessionLock, PostgresFencedResource, SCHEMA_SQL, advisoryKey, ensureSchema, tryWithXactLock, withXactLock } from '../../src/recipes/postgres/index.js';
import {
  EtcdCluster,
  EtcdServer,
  FaultProxy,
  HistoryRecorder,
  PgBouncerServer,
  PostgresServer,
  makeCertificates,
  RedisCluster,
  RedisServer,
  ZooKeeperEnsemble,
  ZooKeeperServer,
  checkHistory,
  spawnWorker,
} from '../../src/testing/index.js';
import { publicApi } from './public-api.js';

/**
 * Unknown option names are refused (issue 20): every options object a caller can hand to tenure —
 * found from the entry points by public-api.ts, so a new one fails here until it has its row —
 * refuses a key it does not know with a ConfigError naming it and saying what was likely meant,
 * synchronously or as a rejection, before any I/O. A TTL misspelt as `ttl` must never run with
 * the 10 s default.
 */

let etcd: EtcdServer;
let zk: ZooKeeperServer;
let etcdClient: Awaited<ReturnType<typeof createEtcdClient>>;
let es: EtcdSession;
let zs: ZkSession;
// Nothing listens on port 1: a call that reached the network would fail with another error.
const redis = new Redis({ lazyConnect: true, port: 1 });
const pool = new pg.Pool({ port: 1 });
const quit = join(tmpdir(), `tenure-unknown-options-${process.pid}.mjs`);

beforeAll(async () => {
  [etcd, zk] = await Promise.all([new EtcdServer().start(), new ZooKeeperServer().start()]);
  etcdClient = await createEtcdClient({ hosts: etcd.endpoints });
  [es, zs] = await Promise.all([EtcdSession.create({ client: etcdClient, ttlMs: 2000 }), ZkSession.create({ connectionString: zk.connectionString })]);
  writeFileSync(quit, 'process.exit(0);\n');
});
afterAll(async () => {
  await Promise.all([es?.close(), zs?.close()]);
  etcdClient?.close();
  redis.disconnect();
  await pool.end();
  await Promise.all([etcd?.stop(), zk?.stop()]);
  rmSync(quit, { force: true });
});

const manager = (): LeadershipManager => new LeadershipManager(new RedisElection(redis, 'x'));
@Leader('x')
class LeaderService {}
async function withWorker(fn: (w: Awaited<ReturnType<typeof spawnWorker>>) => unknown): Promise<unknown> {
  const w = await spawnWorker(quit);
  try {
    return await fn(w);
  } finally {
    await w.exited;
  }
}
async function withLease(fn: (lease: Awaited<ReturnType<EtcdMutex['acquire']>>) => unknown): Promise<unknown> {
  const lease = await new EtcdMutex(es, `uo/follow-${Math.random()}`).acquire();
  try {
    return await fn(lease);
  } finally {
    await lease.release();
  }
}
async function stopAfter<T extends { stop(): Promise<void> }>(make: () => T, fn: (x: T) => unknown): Promise<unknown> {
  const x = make();
  try {
    return await fn(x);
  } finally {
    await x.stop();
  }
}

/** How to hand each options object (by its public-api.ts label) to tenure. */
const calls: Record<string, (o: never) => unknown> = {
  // Core and lifecycle.
  'new LeadershipManager(options)': (o) => new LeadershipManager(new RedisElection(redis, 'x'), o),
  'LeadershipManagerOptions.backoff': (o) => new LeadershipManager(new RedisElection(redis, 'x'), { backoff: o }),
  'LeadershipManager#whenElected(options)': (o) => manager().whenElected(o),
  'InMemoryFencedResource#write(options)': (o) => new InMemoryFencedResource('x').write(1n, () => 1, o),
  'InMemoryFencedResource#highestFence(options)': (o) => new InMemoryFencedResource('x').highestFence(o),
  'LeadershipManager#cron(options)': (o) => manager().cron('* * * * *', () => 1, o),
  'LeadershipManager#resign(options)': (o) => manager().resign(o),
  'shutdownOnSignals(options)': (o) => shutdownOnSignals(manager(), o),
  'Leader(options)': (o) => Leader(o),
  'bindLeader(options)': (o) => bindLeader(new LeaderService(), manager(), o),
  'LeaseCandidate#campaign(options)': (o) => new RedisElection(redis, 'x').campaign(o),
  'LeaseCandidate#leader(options)': (o) => new PgElection(pool, 'x').leader(o),
  'LeaseCandidate#observe(options)': (o) => new RedisElection(redis, 'x').observe(o),
  // ZooKeeper.
  'ZkSession.create(options)': (o) => ZkSession.create(o),
  'ZkSession.create(wait)': (o) => ZkSession.create({ connectionString: zk.connectionString }, o),
  'ZkSession#whenConnected(options)': (o) => zs.whenConnected(o),
  'new InterProcessMutex(options)': (o) => new InterProcessMutex(zs, '/uo/m', o),
  'InterProcessLock#acquire(options)': (o) => new InterProcessMutex(zs, '/uo/m').acquire(o),
  'InterProcessLock#tryAcquire(options)': (o) => new InterProcessMutex(zs, '/uo/m').tryAcquire(o),
  'InterProcessLock#holder(options)': (o) => new InterProcessMutex(zs, '/uo/m').holder(o),
  'new LeaderLatch(options)': (o) => new LeaderLatch(zs, '/uo/l', o),
  'LeaderLatch#campaign(options)': (o) => new LeaderLatch(zs, '/uo/l').campaign(o),
  'LeaderLatch#participants(options)': (o) => new LeaderLatch(zs, '/uo/l').participants(o),
  'LeaderLatch#leader(options)': (o) => new LeaderLatch(zs, '/uo/l').leader(o),
  'LeaderLatch#observe(options)': (o) => new LeaderLatch(zs, '/uo/l').observe(o),
  'InterProcessSemaphoreV2#acquire(options)': (o) => new InterProcessSemaphoreV2(zs, '/uo/s', 2).acquire(1, o),
  'new InterProcessReadWriteLock(options)': (o) => new InterProcessReadWriteLock(zs, '/uo/rw', o),
  // etcd.
  'EtcdSession.create(options)': (o) => EtcdSession.create(o),
  'EtcdSession.create(wait)': (o) => EtcdSession.create({ client: etcdClient, ttlMs: 2000 }, o),
  'createEtcdClient(options)': (o) => createEtcdClient(o),
  'new EtcdElection(options)': (o) => new EtcdElection(es, 'uo/e', o),
  'EtcdElection#campaign(options)': (o) => new EtcdElection(es, 'uo/e').campaign(o),
  'EtcdElection#leader(options)': (o) => new EtcdElection(es, 'uo/e').leader(o),
  'EtcdElection#observe(options)': (o) => new EtcdElection(es, 'uo/e').observe(o),
  'EtcdMutex#acquire(options)': (o) => new EtcdMutex(es, 'uo/m').acquire(o),
  'EtcdMutex#tryAcquire(options)': (o) => new EtcdMutex(es, 'uo/m').tryAcquire(o),
  // Redis.
  'new RedisLock(options)': (o) => new RedisLock(redis, 'x', o),
  'RedisLock#acquire(options)': (o) => new RedisLock(redis, 'x').acquire(o),
  'RedisLock#tryAcquire(options)': (o) => new RedisLock(redis, 'x').tryAcquire(o),
  'RedisLock#holder(options)': (o) => new RedisLock(redis, 'x').holder(o),
  'new RedisElection(options)': (o) => new RedisElection(redis, 'x', o),
  'new RedisFencedResource(options)': (o) => new RedisFencedResource(redis, 'x', o),
  'RedisFencedResource#write(options)': (o) => new RedisFencedResource(redis, 'x').write(1n, () => 1, o),
  'RedisFencedResource#highestFence(options)': (o) => new RedisFencedResource(redis, 'x').highestFence(o),
  // Postgres.
  'withXactLock(options)': (o) => withXactLock(pool, 'x', () => 1, o),
  'tryWithXactLock(options)': (o) => tryWithXactLock(pool, 'x', () => 1, o),
  'new PgSessionLock(options)': (o) => new PgSessionLock(pool, 'x', o),
  'PgSessionLock#acquire(options)': (o) => new PgSessionLock(pool, 'x').acquire(o),
  'PgSessionLock#tryAcquire(options)': (o) => new PgSessionLock(pool, 'x').tryAcquire(o),
  'PgSessionLock#holder(options)': (o) => new PgSessionLock(pool, 'x').holder(o),
  'new PgElection(options)': (o) => new PgElection(pool, 'x', o),
  'PgElectionOptions.backoff': (o) => new PgElection(pool, 'x', { backoff: o }),
  'ensureSchema(options)': (o) => ensureSchema(pool, o),
  'new PostgresFencedResource(options)': (o) => new PostgresFencedResource(pool, 'x', o),
  'PostgresFencedResource#write(options)': (o) => new PostgresFencedResource(pool, 'x').write(1n, () => 1, o),
  'PostgresFencedResource#highestFence(options)': (o) => new PostgresFencedResource(pool, 'x').highestFence(o),
  'advisoryKey(options)': (o) => advisoryKey('x', o),
  'SCHEMA_SQL(options)': (o) => SCHEMA_SQL(o),
  'GRANTS_SQL(options)': (o) => GRANTS_SQL('app', o),
  'new ShardManager(options)': (o) => new ShardManager(new RedisMembership(redis, 'x'), () => new RedisElection(redis, 'x'), { shards: 4, ...(o as object) }),
  'ShardManagerOptions.backoff': (o) => new ShardManager(new RedisMembership(redis, 'x'), () => new RedisElection(redis, 'x'), { shards: 4, backoff: o }),
  'ShardManager#whenSettled(options)': (o) => new ShardManager(new RedisMembership(redis, 'x'), () => new RedisElection(redis, 'x'), { shards: 4 }).whenSettled(o),
  // Membership (every backend's; the methods are shared).
  'new EtcdMembership(options)': (o) => new EtcdMembership(es, 'uo/members', o),
  'new ZkMembership(options)': (o) => new ZkMembership(zs, '/uo/members', o),
  'new RedisMembership(options)': (o) => new RedisMembership(redis, 'x', o),
  'new PgMembership(options)': (o) => new PgMembership(pool, 'x', o),
  'StoreMembership#join(options)': (o) => new RedisMembership(redis, 'x').join(o),
  'StoreMembership#members(options)': (o) => new PgMembership(pool, 'x').members(o),
  'StoreMembership#observe(options)': (o) => new EtcdMembership(es, 'uo/members').observe(o),
  // tenure/metrics, tenure/inversify.
  'new TenureMetrics(options)': (o) => new TenureMetrics(o),
  'TenureMetrics#instrument(options)': (o) => new TenureMetrics().instrument(manager(), o),
  'TenureMetrics#instrumentShards(options)': (o) => new TenureMetrics().instrumentShards(new ShardManager(new RedisMembership(redis, 'x'), () => new RedisElection(redis, 'x'), { shards: 4 }), o),
  'leadershipModule(options)': (o) => leadershipModule(o),
  'LeadershipModuleOptions.manager': (o) => leadershipModule({ candidate: () => undefined as never, manager: o }),
  // tenure/nestjs.
  'TenureModule.forRoot(options)': (o) => TenureModule.forRoot(o),
  'TenureModule.forRootAsync(options)': (o) => TenureModule.forRootAsync(o),
  'LeadershipService#whenElected(options)': (o) => new LeadershipService('x', manager()).whenElected(o),
  'LeadershipService#resign(options)': (o) => new LeadershipService('x', manager()).resign(o),
  'LeadershipHealthIndicator#isHealthy(options)': (o) => new LeadershipHealthIndicator({ elections: new Map() } as never).isHealthy('leadership', o),
  // tenure/testing.
  'LocalServer#restart(options)': (o) => stopAfter(() => new RedisServer(), (s) => s.restart(o)),
  'LocalCluster#restart(options)': (o) => stopAfter(() => new ZooKeeperEnsemble({ size: 1 }), (s) => s.restart(o)),
  'new ZooKeeperServer(options)': (o) => new ZooKeeperServer(o),
  'new ZooKeeperEnsemble(options)': (o) => new ZooKeeperEnsemble(o),
  'new EtcdServer(options)': (o) => new EtcdServer(o),
  'new EtcdCluster(options)': (o) => new EtcdCluster(o),
  'new RedisServer(options)': (o) => new RedisServer(o),
  'RedisServerOptions.replicaOf': (o) => new RedisServer({ replicaOf: o }),
  'new RedisCluster(options)': (o) => new RedisCluster(o),
  'new PgBouncerServer(options)': (o) => new PgBouncerServer(o),
  'new PostgresServer(options)': (o) => new PostgresServer(o),
  'makeCertificates(options)': (o) => makeCertificates(undefined, o),
  'new FaultProxy(options)': (o) => new FaultProxy(o),
  'FaultProxyOptions.target': (o) => new FaultProxy({ target: o }),
  'spawnWorker(options)': (o) => spawnWorker(quit, [], o),
  'WorkerHandle#waitFor(options)': (o) => withWorker((w) => w.waitFor('x', o)),
  'checkHistory(options)': (o) => checkHistory({ ops: [] } as never, o),
  'new HistoryRecorder(options)': (o) => new HistoryRecorder('p', o),
  'HistoryRecorder#follow(options)': (o) => withLease((lease) => new HistoryRecorder('p').follow(lease, o)),
};

/** What a call ends in; a refusal comes before any I/O, so a call still running after 3 s accepted the key. */
async function outcome(call: () => unknown): Promise<unknown> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      (async () => {
        await call();
        return 'accepted';
      })(),
      new Promise((resolve) => (timer = setTimeout(() => resolve('accepted (still running after 3 s)'), 3000))),
    ]);
  } catch (e) {
    return e;
  } finally {
    clearTimeout(timer);
  }
}
const show = (e: unknown): string => (e instanceof Error ? `${e.name} ${e instanceof ConfigError ? `(${e.field}) ` : ''}${e.message}` : String(e));

describe('unknown options', () => {
  it('every public options object, the testing kit\'s too, has a row here (found from the entry points)', () => {
    const labels = publicApi().sites.map((s) => s.label);
    expect(labels.filter((l) => !(l in calls))).toEqual([]);
    expect(Object.keys(calls).filter((l) => !labels.includes(l))).toEqual([]); // no row for what is gone
  }, 60_000);

  it('every options object refuses a key it does not know, naming it, with every key it knows accepted', async () => {
    const failures: string[] = [];
    for (const site of publicApi().sites) {
      const call = calls[site.label];
      if (!call) continue; // reported by the test above
      // Every known key (as undefined: "not given"), then one unknown: the error must name the unknown one.
      const probe = { ...Object.fromEntries(site.keys.map((k) => [k, undefined])), notAnOption: 1 };
      const e = await outcome(() => call(probe as never));
      if (!(e instanceof ConfigError) || e.code !== 'CONFIG_INVALID' || e.field !== `${site.prefix}notAnOption` || !/unknown option/.test(e.message)) {
        failures.push(`${site.label}: ${show(e)}`);
      }
      // A near miss of a known key is told the key.
      const key = site.keys.at(-1)!;
      const near = await outcome(() => call({ [key.toUpperCase()]: 1 } as never));
      if (!(near instanceof ConfigError) || !near.message.includes(`did you mean '${key}'`)) failures.push(`${site.label} (${key.toUpperCase()}): ${show(near)}`);
    }
    expect(failures).toEqual([]);
  }, 120_000);

  it("the names users bring — tenure's earlier ones, the peers', a unit left off — are refused with tenure's name", async () => {
    // [call, the field named, the name suggested]
    const cases: [() => unknown, string, string][] = [
      // The issue's six: each ran with the defaults (a 10 s TTL for a 2 s one).
      [() => EtcdSession.create(opt({ hosts: etcd.endpoints, ttlSeconds: 2 })), 'ttlSeconds', 'ttlMs'],
      [() => ZkSession.create(opt({ connectionString: zk.connectionString, sessionTimeoutMs: 2000 })), 'sessionTimeoutMs', 'ttlMs'],
      [() => new RedisLock(redis, 'x', opt({ ttl: 2000 })), 'ttl', 'ttlMs'],
      [() => new PgElection(pool, 'x', opt({ minBackoffMs: 10 })), 'minBackoffMs', 'backoff'],
      [() => withXactLock(pool, 'n', () => 1, opt({ timeout: 100 })), 'timeout', 'timeoutMs'],
      [() => new LeadershipManager(new RedisElection(redis, 'x'), opt({ drainTimeout: 5 })), 'drainTimeout', 'drainTimeoutMs'],
      // Curator, node-zookeeper-client.
      [() => ZkSession.create(opt({ connectString: zk.connectionString })), 'connectString', 'connectionString'],
      [() => ZkSession.create(opt({ connectionString: zk.connectionString, sessionTimeout: 2000 })), 'sessionTimeout', 'ttlMs'],
      [() => ZkSession.create(opt({ connectionString: zk.connectionString, connectionTimeoutMs: 2000 })), 'connectionTimeoutMs', 'connectTimeoutMs'],
      [() => new LeaderLatch(zs, '/x', opt({ participantId: 'a' })), 'participantId', 'id'],
      // etcd3 and etcd's Go client.
      [() => createEtcdClient(opt({ endpoints: etcd.endpoints })), 'endpoints', 'hosts'],
      [() => EtcdSession.create(opt({ client: etcdClient, ttl: 2 })), 'ttl', 'ttlMs'],
      [() => EtcdSession.create(opt({ client: etcdClient, lease: 2 })), 'lease', 'ttlMs'],
      // redlock, redis-semaphore.
      [() => new RedisLock(redis, 'x', opt({ lockTimeout: 2000 })), 'lockTimeout', 'ttlMs'],
      [() => new RedisLock(redis, 'x', opt({ driftFactor: 0.01 })), 'driftFactor', 'safetyMarginMs'],
      [() => new RedisLock(redis, 'x', opt({ retryDelay: 200 })), 'retryDelay', 'retryMaxMs'],
      [() => new RedisLock(redis, 'x').acquire(opt({ retryCount: 3 })), 'retryCount', 'timeoutMs'],
      [() => new RedisLock(redis, 'x').acquire(opt({ acquireTimeout: 3 })), 'acquireTimeout', 'timeoutMs'],
      // client-go leaderelection.
      [() => new RedisElection(redis, 'x', opt({ leaseDuration: 15 })), 'leaseDuration', 'ttlMs'],
      [() => new RedisElection(redis, 'x', opt({ renewDeadline: 10 })), 'renewDeadline', 'safetyMarginMs'],
      [() => new PgElection(pool, 'x', opt({ identity: 'a' })), 'identity', 'id'],
      // Postgres's own name for the wait's bound, nested options, a manager in a module, cron.
      [() => withXactLock(pool, 'n', () => 1, opt({ lock_timeout: 100 })), 'lock_timeout', 'timeoutMs'],
      [() => new PgElection(pool, 'x', { backoff: opt({ min: 10 }) }), 'backoff.min', 'initialMs'],
      [() => leadershipModule({ candidate: () => undefined as never, manager: opt({ drainTimeout: 5 }) }), 'manager.drainTimeout', 'drainTimeoutMs'],
      [() => TenureModule.forRoot(opt({ candidate: new RedisElection(redis, 'x'), drainTimeout: 5 })), 'drainTimeout', 'drainTimeoutMs'],
      [() => TenureModule.forRootAsync(opt({ useFactory: () => ({}), injects: [] })), 'injects', 'inject'],
      [() => new LeadershipManager(new RedisElection(redis, 'x')).cron('* * * * *', () => 1, opt({ timeZone: 'UTC' })), 'timeZone', 'timezone'],
      [() => new LeadershipManager(new RedisElection(redis, 'x')).resign(opt({ cooldown: 5 })), 'cooldown', 'cooldownMs'],
      [() => new PgSessionLock(pool, 'x', opt({ saftyMarginMs: 5 })), 'saftyMarginMs', 'safetyMarginMs'],
      // A try does not wait: timeoutMs is refused, not ignored.
      [() => tryWithXactLock(pool, 'n', () => 1, opt({ timeoutMs: 100 })), 'timeoutMs', ''],
    ];
    const failures: string[] = [];
    for (const [call, field, hint] of cases) {
      const e = await outcome(call);
      if (!(e instanceof ConfigError) || e.field !== field || !e.message.startsWith(`${field}: unknown option; `) || (hint && !e.message.includes(`did you mean '${hint}'`))) {
        failures.push(`${field} → ${hint || '(none)'}: ${show(e)}`);
      }
    }
    expect(failures).toEqual([]);
  });

  it('a driver\'s own options pass through unchecked (they are not tenure\'s)', async () => {
    const client = await createEtcdClient({ hosts: 'http://127.0.0.1:1', etcd3: { dialTimeout: 100 } });
    client.close();
    expect(() => new PostgresServer({ settings: { work_mem: '4MB', anything_at_all: 1 } })).not.toThrow();
  });
});

function opt(o: Record<string, unknown>): never {
  return o as never;
}
