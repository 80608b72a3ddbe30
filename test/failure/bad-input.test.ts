import { Redis } from 'ioredis';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bindLeader, ConfigError, InMemoryFencedResource, Leader, LeadershipManager, ShardManager, shutdownOnSignals } from '../../src/index.js';
import { leadershipManagerId, leadershipModule } from '../../src/integrations/inversify/index.js';
import { getLeadershipToken, InjectLeadership, LeadershipHealthIndicator, LeadershipService, TenureModule } from '../../src/integrations/nestjs/index.js';
import { TenureMetrics } from '../../src/integrations/metrics/index.js';
import { EtcdServer, ZooKeeperServer } from '../../src/testing/index.js';
import { EtcdElection, EtcdMembership, EtcdMutex, EtcdSession, createEtcdClient } from '../../src/recipes/etcd/index.js';
import { InterProcessMutex, InterProcessReadWriteLock, InterProcessSemaphoreV2, LeaderLatch, ZkMembership, ZkSession } from '../../src/recipes/zk/index.js';
import { RedisElection, RedisFencedResource, RedisLock, RedisMembership } from '../../src/recipes/redis/index.js';
import { GRANTS_SQL, PgElection, PgMembership, PgSessionLock, PostgresFencedResource, SCHEMA_SQL, advisoryKey, ensureSchema, tryWithXactLock, withXactLock } from '../../src/recipes/postgres/index.js';
import { publicApi } from './public-api.js';

/**
 * Bad input, every public constructor and method (issue 9): wrong types, empty, negative, NaN,
 * Infinity, 2^31, 2^53, oversize, odd characters. Each must end in a ConfigError naming the
 * field — synchronously or as a rejection, before any I/O — and nothing else. The first test
 * fails when a public option (of an options interface or an inline options type, found from the
 * entry points by public-api.ts) has no row here. Unknown keys: unknown-options.test.ts.
 */
// Value families.
const MS = ['10', -1, Number.NaN, Infinity, 2 ** 31, 2 ** 53, null, {}];
const INT_MS = [...MS, 1.5];
const ID = [7, '', 'x'.repeat(100_000), 'a\u0000b', null, {}];
const SIGNAL = [{}, 'abort', 1, { aborted: false }];
const LOGGER = [{}, 'pino', { info() {} }, 1];
const CLOCK = [{}, { now: () => 'soon' }, { now: () => Number.NaN }, 5];

let etcd: EtcdServer;
let zk: ZooKeeperServer;
let etcdClient: Awaited<ReturnType<typeof createEtcdClient>>;
let es: EtcdSession;
let zs: ZkSession;
const redis = new Redis({ lazyConnect: true, port: 1 });
const pool = new pg.Pool({ port: 1 });

beforeAll(async () => {
  [etcd, zk] = await Promise.all([new EtcdServer().start(), new ZooKeeperServer().start()]);
  etcdClient = await createEtcdClient({ hosts: etcd.endpoints });
  [es, zs] = await Promise.all([EtcdSession.create({ client: etcdClient, ttlMs: 2000 }), ZkSession.create({ connectionString: zk.connectionString })]);
});
afterAll(async () => {
  await Promise.all([es?.close(), zs?.close()]);
  etcdClient?.close();
  redis.disconnect();
  await pool.end();
  await Promise.all([etcd?.stop(), zk?.stop()]);
});

type Row = { covers: string[]; field: string; values: unknown[]; call: (v: unknown) => unknown };
const opt = (o: Record<string, unknown>) => o as never;

/** Every row: which `Interface.property` (or argument) it covers, the field the error must name, the bad values. */
const rows = (): Row[] => [
  // Shared waits: every method that can wait.
  ...(['signal', 'timeoutMs'] as const).map((f) => ({
    covers: [`WaitOptions.${f}`],
    field: f,
    values: f === 'signal' ? SIGNAL : MS,
    call: async (v: unknown) => {
      const o = opt({ [f]: v });
      const calls: Promise<unknown>[] = [
        new EtcdMutex(es, 'bi/m').acquire(o),
        new EtcdMutex(es, 'bi/m2').tryAcquire(o),
        new EtcdElection(es, 'bi/e').campaign(o),
        new EtcdElection(es, 'bi/e2').leader(o),
        new InterProcessMutex(zs, '/bi/m').acquire(o),
        new InterProcessMutex(zs, '/bi/m2').tryAcquire(o),
        new LeaderLatch(zs, '/bi/l').campaign(o),
        new RedisLock(redis, 'bi').acquire(o),
        new RedisLock(redis, 'bi2').tryAcquire(o),
        new RedisElection(redis, 'bi3').campaign(o),
        new PgSessionLock(pool, 'bi').acquire(o),
        new PgElection(pool, 'bi').campaign(o),
        withXactLock(pool, 'bi', () => 1, o),
        new EtcdMembership(es, 'bi/members').join(o),
        new ZkMembership(zs, '/bi/members').members(o),
        new RedisMembership(redis, 'bi').join(o),
        new PgMembership(pool, 'bi').members(o),
        new RedisFencedResource(redis, 'bi:fence').write(1n, () => 1, o),
        new RedisFencedResource(redis, 'bi:fence').highestFence(o),
        new PostgresFencedResource(pool, 'bi').write(1n, () => 1, o),
        new PostgresFencedResource(pool, 'bi').highestFence(o),
        new InMemoryFencedResource('bi').write(1n, () => 1, o),
        new InMemoryFencedResource('bi').highestFence(o),
      ];
      const outcomes = await Promise.allSettled(calls);
      const bad = outcomes.find((x) => x.status === 'fulfilled' || !(x.reason instanceof ConfigError) || x.reason.field !== f);
      if (bad) throw bad.status === 'rejected' ? bad.reason : new Error('accepted');
      throw (outcomes[0] as PromiseRejectedResult).reason;
    },
  })),
  // Inline options types.
  { covers: ['LeadershipManager#whenElected(options).signal'], field: 'signal', values: SIGNAL, call: (v) => new LeadershipManager(new RedisElection(redis, 'x')).whenElected(opt({ signal: v })) },
  { covers: ['LeadershipManager#whenElected(options).timeoutMs'], field: 'timeoutMs', values: MS, call: (v) => new LeadershipManager(new RedisElection(redis, 'x')).whenElected(opt({ timeoutMs: v })) },
  { covers: ['LeadershipManager#resign(options).cooldownMs'], field: 'cooldownMs', values: INT_MS, call: (v) => new LeadershipManager(new RedisElection(redis, 'x')).resign(opt({ cooldownMs: v })) },
  { covers: ['LeaseCandidate#observe(options).signal', 'EtcdElection#observe(options).signal', 'LeaderLatch#observe(options).signal', 'StoreMembership#observe(options).signal'], field: 'signal', values: SIGNAL, call: (v) => {
    for (const make of [() => new RedisElection(redis, 'x').observe(opt({ signal: v })), () => new PgElection(pool, 'x').observe(opt({ signal: v })), () => new EtcdElection(es, 'x').observe(opt({ signal: v })), () => new LeaderLatch(zs, '/x').observe(opt({ signal: v })), () => new RedisMembership(redis, 'x').observe(opt({ signal: v })), () => new ZkMembership(zs, '/x').observe(opt({ signal: v }))]) {
      let threw: unknown;
      try { make(); } catch (e) { threw = e; }
      if (!(threw instanceof ConfigError) || threw.field !== 'signal') throw threw ?? new Error('accepted');
    }
    throw new ConfigError('signal', 'all refused');
  } },
  { covers: ['ZkSession.create(wait).signal'], field: 'signal', values: SIGNAL, call: (v) => ZkSession.create({ connectionString: zk.connectionString }, opt({ signal: v })) },
  { covers: ['ZkSession.create(wait).timeoutMs'], field: 'timeoutMs', values: MS, call: (v) => ZkSession.create({ connectionString: zk.connectionString }, opt({ timeoutMs: v })) },
  { covers: ['EtcdSession.create(wait).signal'], field: 'signal', values: SIGNAL, call: (v) => EtcdSession.create({ client: etcdClient, ttlMs: 2000 }, opt({ signal: v })) },
  { covers: ['EtcdSession.create(wait).timeoutMs'], field: 'timeoutMs', values: MS, call: (v) => EtcdSession.create({ client: etcdClient, ttlMs: 2000 }, opt({ timeoutMs: v })) },
  // Backoff (PgElection).
  { covers: ['BackoffOptions.initialMs', 'PgElectionOptions.backoff'], field: 'backoff.initialMs', values: MS.filter((v) => v !== null && typeof v !== 'object'), call: (v) => new PgElection(pool, 'x', { backoff: opt({ initialMs: v }) }) },
  { covers: ['BackoffOptions.maxMs'], field: 'backoff.maxMs', values: [...MS.filter((v) => v !== null && typeof v !== 'object'), 10], call: (v) => new PgElection(pool, 'x', { backoff: opt({ initialMs: 100, maxMs: v }) }) },
  // ZooKeeper.
  { covers: ['ZkSessionOptions.connectionString'], field: 'connectionString', values: [7, '', 'localhost', '127.0.0.1:99999', '127.0.0.1:0', 'a b:1', '127.0.0.1:1/ chroot', null], call: (v) => ZkSession.create(opt({ connectionString: v })) },
  ...(['ttlMs', 'connectTimeoutMs', 'callTimeoutMs', 'spinDelayMs'] as const).map((f) => ({ covers: [`ZkSessionOptions.${f}`], field: f, values: INT_MS.filter((v) => !(f === 'spinDelayMs' && v === 2 ** 53) || true), call: (v: unknown) => ZkSession.create(opt({ connectionString: zk.connectionString, [f]: v })) })),
  { covers: ['ZkSessionOptions.safetyMarginMs'], field: 'safetyMarginMs', values: [...MS, 0, 7000], call: (v) => ZkSession.create(opt({ connectionString: zk.connectionString, ttlMs: 10_000, safetyMarginMs: v })) },
  { covers: ['ZkSessionOptions.policy'], field: 'policy', values: ['lenient', 1, null], call: (v) => ZkSession.create(opt({ connectionString: zk.connectionString, policy: v })) },
  { covers: ['ZkSessionOptions.logger'], field: 'logger', values: LOGGER, call: (v) => ZkSession.create(opt({ connectionString: zk.connectionString, logger: v })) },
  { covers: ['ZkSessionOptions.clock'], field: 'clock', values: CLOCK, call: (v) => ZkSession.create(opt({ connectionString: zk.connectionString, clock: v })) },
  { covers: ['ZkSessionOptions.authInfo'], field: 'authInfo', values: ['user:pw', 1, {}], call: (v) => ZkSession.create(opt({ connectionString: zk.connectionString, authInfo: v })) },
  { covers: ['ZkSessionOptions.acl', 'InterProcessMutexOptions.acl', 'LeaderLatchOptions.acl'], field: 'acl', values: ['world:anyone', 1, []], call: (v) => new InterProcessMutex(zs, '/x', opt({ acl: v })) },
  { covers: ['InterProcessMutexOptions.acl'], field: 'acl', values: ['world:anyone', 1, []], call: (v) => new InterProcessReadWriteLock(zs, '/x', opt({ acl: v })) },
  { covers: ['LeaderLatchOptions.acl'], field: 'acl', values: ['world:anyone', 1, []], call: (v) => new LeaderLatch(zs, '/x', opt({ acl: v })) },
  { covers: ['InterProcessMutexOptions.id', 'LeaderLatchOptions.id', 'EtcdElectionOptions.id', 'RedisLockOptions.id', 'PgLockOptions.id'], field: 'id', values: ID, call: (v) => {
    for (const make of [() => new InterProcessMutex(zs, '/x', opt({ id: v })), () => new LeaderLatch(zs, '/x', opt({ id: v })), () => new InterProcessReadWriteLock(zs, '/x', opt({ id: v })), () => new EtcdElection(es, 'x', opt({ id: v })), () => new RedisLock(redis, 'x', opt({ id: v })), () => new RedisElection(redis, 'x', opt({ id: v })), () => new PgSessionLock(pool, 'x', opt({ id: v })), () => new PgElection(pool, 'x', opt({ id: v }))]) {
      let threw: unknown;
      try { make(); } catch (e) { threw = e; }
      if (!(threw instanceof ConfigError) || threw.field !== 'id') throw threw ?? new Error('accepted');
    }
    throw new ConfigError('id', 'all refused');
  } },
  { covers: ['LeaderLatchOptions.closeMode'], field: 'closeMode', values: ['loud', 1], call: (v) => new LeaderLatch(zs, '/x', opt({ closeMode: v })) },
  { covers: ['arg:zk.path'], field: 'path', values: [7, '', 'x', '/', '/a/', '/a//b', '/a/./b', '/a/\u0001'], call: (v) => new InterProcessMutex(zs, v as string) },
  { covers: ['arg:zk.maxLeases'], field: 'maxLeases', values: [0, -1, 1.5, Number.NaN, 'x'], call: (v) => new InterProcessSemaphoreV2(zs, '/x', v as number) },
  { covers: ['arg:zk.session'], field: 'session', values: [{}, null, 'zk'], call: (v) => new LeaderLatch(v as never, '/x') },
  // etcd.
  { covers: ['EtcdSessionOptions.client', 'EtcdSessionOptions.hosts'], field: 'client', values: [{}], call: () => EtcdSession.create(opt({})) },
  { covers: ['EtcdClientOptions.hosts'], field: 'hosts', values: [[], '', [1], null], call: (v) => createEtcdClient(opt({ hosts: v })) },
  { covers: ['EtcdClientOptions.maxAttempts'], field: 'maxAttempts', values: [0, 21, 1.5, Number.NaN, 'x'], call: (v) => createEtcdClient(opt({ hosts: 'http://127.0.0.1:1', maxAttempts: v })) },
  { covers: ['EtcdClientOptions.retryDelayMs'], field: 'retryDelayMs', values: [0, -1, 10_001, Number.NaN, 'x'], call: (v) => createEtcdClient(opt({ hosts: 'http://127.0.0.1:1', retryDelayMs: v })) },
  { covers: ['EtcdClientOptions.etcd3'], field: 'etcd3', values: ['x', 1], call: (v) => createEtcdClient(opt({ hosts: 'http://127.0.0.1:1', etcd3: v })) },
  { covers: ['EtcdSessionOptions.ttlMs'], field: 'ttlMs', values: [...INT_MS, 0, 1500, 999], call: (v) => EtcdSession.create(opt({ client: etcdClient, ttlMs: v })) },
  { covers: ['EtcdSessionOptions.safetyMarginMs'], field: 'safetyMarginMs', values: [...MS, 0, 2000], call: (v) => EtcdSession.create(opt({ client: etcdClient, ttlMs: 2000, safetyMarginMs: v })) },
  { covers: ['EtcdSessionOptions.leaseId'], field: 'leaseId', values: ['abc', '0', -1, '1'.repeat(30)], call: (v) => EtcdSession.create(opt({ client: etcdClient, leaseId: v })) },
  { covers: ['EtcdSessionOptions.callTimeoutMs'], field: 'callTimeoutMs', values: INT_MS, call: (v) => EtcdSession.create(opt({ client: etcdClient, callTimeoutMs: v })) },
  { covers: ['EtcdSessionOptions.clock'], field: 'clock', values: CLOCK, call: (v) => EtcdSession.create(opt({ client: etcdClient, clock: v })) },
  { covers: ['EtcdSessionOptions.logger'], field: 'logger', values: LOGGER, call: (v) => EtcdSession.create(opt({ client: etcdClient, logger: v })) },
  { covers: ['arg:etcd.name'], field: 'name', values: [7, '', 'a b', 'a//b', 'a/', 'x'.repeat(600)], call: (v) => new EtcdMutex(es, v as string) },
  { covers: ['arg:etcd.session'], field: 'session', values: [{}, null], call: (v) => new EtcdElection(v as never, 'x') },
  { covers: ['arg:etcd.proclaim'], field: 'value', values: [7, null, {}, Buffer.alloc(1024 * 1024 + 1)], call: async (v) => {
    const e = new EtcdElection(es, `bi/proclaim-${Math.random()}`);
    const t = await e.campaign();
    try { await t.proclaim(v as string); } finally { await e.close(); }
  } },
  // Redis.
  { covers: ['arg:redis.client'], field: 'redis', values: [{}, null, pool], call: (v) => new RedisLock(v as never, 'x') },
  { covers: ['arg:redis.name'], field: 'name', values: [7, '', 'a{b}', 'a\nb', 'x'.repeat(300)], call: (v) => new RedisLock(redis, v as string) },
  { covers: ['RedisLockOptions.ttlMs'], field: 'ttlMs', values: [...INT_MS, 0, 29], call: (v) => new RedisLock(redis, 'x', opt({ ttlMs: v })) },
  { covers: ['RedisLockOptions.safetyMarginMs'], field: 'safetyMarginMs', values: [...MS, 0, 700], call: (v) => new RedisLock(redis, 'x', opt({ ttlMs: 1000, safetyMarginMs: v })) },
  { covers: ['RedisLockOptions.restartGuardMs'], field: 'restartGuardMs', values: [...INT_MS, 500], call: (v) => new RedisLock(redis, 'x', opt({ ttlMs: 1000, restartGuardMs: v })) },
  { covers: ['RedisLockOptions.keyPrefix'], field: 'keyPrefix', values: [7, 'a\nb', 'a{b', 'x'.repeat(200)], call: (v) => new RedisLock(redis, 'x', opt({ keyPrefix: v })) },
  { covers: ['RedisLockOptions.retryMaxMs'], field: 'retryMaxMs', values: [...MS, 0, 600_001], call: (v) => new RedisLock(redis, 'x', opt({ retryMaxMs: v })) },
  { covers: ['RedisLockOptions.callTimeoutMs', 'RedisFencedResourceOptions.callTimeoutMs'], field: 'callTimeoutMs', values: INT_MS, call: (v) => {
    for (const make of [() => new RedisLock(redis, 'x', opt({ callTimeoutMs: v })), () => new RedisFencedResource(redis, 'x', opt({ callTimeoutMs: v }))]) {
      let threw: unknown;
      try { make(); } catch (e) { threw = e; }
      if (!(threw instanceof ConfigError) || threw.field !== 'callTimeoutMs') throw threw ?? new Error('accepted');
    }
    throw new ConfigError('callTimeoutMs', 'all refused');
  } },
  { covers: ['RedisLockOptions.logger'], field: 'logger', values: LOGGER, call: (v) => new RedisLock(redis, 'x', opt({ logger: v })) },
  { covers: ['RedisLockOptions.clock'], field: 'clock', values: CLOCK, call: (v) => new RedisLock(redis, 'x', opt({ clock: v })) },
  { covers: ['RedisElectionOptions.observeIntervalMs'], field: 'observeIntervalMs', values: [...MS, 5], call: (v) => new RedisElection(redis, 'x', opt({ observeIntervalMs: v })) },
  { covers: ['arg:redis.fencedValue'], field: 'value[0]', values: [{}, null, undefined, Symbol('s'), Number.NaN, () => 1], call: (v) => new RedisFencedResource(redis, 'x').write(1n, (w) => void w.set('k', v as string)) },
  { covers: ['arg:redis.key'], field: 'key', values: [7, '', 'x'.repeat(2000)], call: (v) => new RedisFencedResource(redis, v as string) },
  // Postgres.
  { covers: ['arg:pg.pool'], field: 'pool', values: [{}, null, redis, new pg.Client({ port: 1 })], call: (v) => new PgSessionLock(v as never, 'x') },
  { covers: ['arg:pg.name'], field: 'name', values: [7, '', 'a\u0000b', 'x'.repeat(300)], call: (v) => new PgSessionLock(pool, v as string) },
  { covers: ['PgLockOptions.ttlMs'], field: 'ttlMs', values: [...INT_MS, 0, 99], call: (v) => new PgSessionLock(pool, 'x', opt({ ttlMs: v })) },
  { covers: ['PgLockOptions.safetyMarginMs'], field: 'safetyMarginMs', values: [...MS, 0, 700], call: (v) => new PgSessionLock(pool, 'x', opt({ ttlMs: 1000, safetyMarginMs: v })) },
  { covers: ['PgLockOptions.callTimeoutMs', 'XactLockOptions.callTimeoutMs', 'EnsureSchemaOptions.callTimeoutMs', 'PostgresFencedResourceOptions.callTimeoutMs'], field: 'callTimeoutMs', values: INT_MS, call: async (v) => {
    const outcomes = await Promise.allSettled([
      (async () => new PgSessionLock(pool, 'x', opt({ callTimeoutMs: v })))(),
      withXactLock(pool, 'x', () => 1, opt({ callTimeoutMs: v })),
      ensureSchema(pool, opt({ callTimeoutMs: v })),
      (async () => new PostgresFencedResource(pool, 'x', opt({ callTimeoutMs: v })))(),
    ]);
    const bad = outcomes.find((x) => x.status === 'fulfilled' || !(x.reason instanceof ConfigError) || x.reason.field !== 'callTimeoutMs');
    if (bad) throw bad.status === 'rejected' ? bad.reason : new Error('accepted');
    throw new ConfigError('callTimeoutMs', 'all refused');
  } },
  { covers: ['PgLockOptions.namespace', 'XactLockOptions.namespace'], field: 'namespace', values: [1.5, 2 ** 31, -(2 ** 31) - 1, 'tenu', Number.NaN], call: (v) => new PgSessionLock(pool, 'x', opt({ namespace: v })) },
  { covers: ['AdvisoryKeyOptions.namespace'], field: 'namespace', values: [1.5, 2 ** 31, 'tenu', 0x74656e76], call: (v) => advisoryKey('x', opt({ namespace: v })) },
  // A schema is a quoted identifier: longer than 63 bytes the server would truncate it (two names, one schema), pg_ is reserved (pg_temp is per session).
  { covers: ['PgSchemaOptions.schema'], field: 'schema', values: [7, '', 'a\u0000b', 's'.repeat(64), 'é'.repeat(32), 'pg_temp', null, {}], call: async (v) => {
    const outcomes = await Promise.allSettled([
      (async () => new PgSessionLock(pool, 'x', opt({ schema: v })))(),
      (async () => new PgElection(pool, 'x', opt({ schema: v })))(),
      withXactLock(pool, 'x', () => 1, opt({ schema: v })),
      tryWithXactLock(pool, 'x', () => 1, opt({ schema: v })),
      ensureSchema(pool, opt({ schema: v })),
      (async () => new PostgresFencedResource(pool, 'x', opt({ schema: v })))(),
      (async () => advisoryKey('x', opt({ schema: v })))(),
      (async () => SCHEMA_SQL(opt({ schema: v })))(),
      (async () => GRANTS_SQL('app', opt({ schema: v })))(),
    ]);
    const bad = outcomes.find((x) => x.status === 'fulfilled' || !(x.reason instanceof ConfigError) || x.reason.field !== 'schema');
    if (bad) throw bad.status === 'rejected' ? bad.reason : new Error('accepted');
    throw new ConfigError('schema', 'all refused');
  } },
  { covers: ['arg:pg.role'], field: 'role', values: [7, '', 'a\u0000b', 'r'.repeat(64), 'public', null], call: (v) => GRANTS_SQL(v as string) },
  { covers: ['PgLockOptions.logger'], field: 'logger', values: LOGGER, call: (v) => new PgSessionLock(pool, 'x', opt({ logger: v })) },
  { covers: ['PgLockOptions.clock'], field: 'clock', values: CLOCK, call: (v) => new PgSessionLock(pool, 'x', opt({ clock: v })) },
  { covers: ['PgElectionOptions.observeIntervalMs'], field: 'observeIntervalMs', values: [...MS, 5], call: (v) => new PgElection(pool, 'x', opt({ observeIntervalMs: v })) },
  { covers: ['PgElectionOptions.waitInQueue'], field: 'waitInQueue', values: ['yes', 1, null], call: (v) => new PgElection(pool, 'x', opt({ waitInQueue: v })) },
  { covers: ['XactLockOptions.signal'], field: 'signal', values: SIGNAL, call: (v) => tryWithXactLock(pool, 'x', () => 1, opt({ signal: v })) },
  { covers: ['XactLockOptions.timeoutMs'], field: 'timeoutMs', values: [...INT_MS, 0, 2 ** 32], call: (v) => withXactLock(pool, 'x', () => 1, opt({ timeoutMs: v })) },
  { covers: ['XactLockOptions.idleTimeoutMs'], field: 'idleTimeoutMs', values: [...INT_MS, 0, 2 ** 32], call: (v) => withXactLock(pool, 'x', () => 1, opt({ idleTimeoutMs: v })) },
  { covers: ['PostgresFencedResourceOptions.idleTimeoutMs'], field: 'idleTimeoutMs', values: [...INT_MS, 0, 2 ** 32], call: async (v) => new PostgresFencedResource(pool, 'x', opt({ idleTimeoutMs: v })) },
  { covers: ['arg:pg.fn'], field: 'fn', values: [1, 'x', null], call: (v) => withXactLock(pool, 'x', v as never) },
  { covers: ['arg:pg.fence', 'PostgresFencedWriteOptions.client'], field: 'fence', values: [-1n, 1, '1', 2n ** 63n], call: (v) => new PostgresFencedResource(pool, 'x').write(v as bigint, () => 1, opt({ client: undefined })) },
  // Membership.
  { covers: ['EtcdMembershipOptions.id', 'ZkMembershipOptions.id', 'RedisMembershipOptions.id'], field: 'id', values: ID, call: (v) => {
    for (const make of [() => new EtcdMembership(es, 'x', opt({ id: v })), () => new ZkMembership(zs, '/x', opt({ id: v })), () => new RedisMembership(redis, 'x', opt({ id: v })), () => new PgMembership(pool, 'x', opt({ id: v }))]) {
      let threw: unknown;
      try { make(); } catch (e) { threw = e; }
      if (!(threw instanceof ConfigError) || threw.field !== 'id') throw threw ?? new Error('accepted');
    }
    throw new ConfigError('id', 'all refused');
  } },
  { covers: ['EtcdMembershipOptions.weight', 'ZkMembershipOptions.weight', 'RedisMembershipOptions.weight', 'PgMembershipOptions.weight'], field: 'weight', values: [0, -1, Number.NaN, Infinity, '2', null, {}, 1e7], call: (v) => {
    for (const make of [() => new EtcdMembership(es, 'x', opt({ weight: v })), () => new ZkMembership(zs, '/x', opt({ weight: v })), () => new RedisMembership(redis, 'x', opt({ weight: v })), () => new PgMembership(pool, 'x', opt({ weight: v }))]) {
      let threw: unknown;
      try { make(); } catch (e) { threw = e; }
      if (!(threw instanceof ConfigError) || threw.field !== 'weight') throw threw ?? new Error('accepted');
    }
    throw new ConfigError('weight', 'all refused');
  } },
  { covers: ['arg:membership.group'], field: 'group', values: [7, '', null, 'x'.repeat(600)], call: (v) => {
    for (const make of [() => new EtcdMembership(es, v as string), () => new RedisMembership(redis, v as string), () => new PgMembership(pool, v as string)]) {
      let threw: unknown;
      try { make(); } catch (e) { threw = e; }
      if (!(threw instanceof ConfigError) || threw.field !== 'group') throw threw ?? new Error('accepted');
    }
    throw new ConfigError('group', 'all refused');
  } },
  { covers: ['arg:membership.path'], field: 'path', values: [7, '', 'x', '/a//b'], call: (v) => new ZkMembership(zs, v as string) },
  { covers: ['arg:membership.session'], field: 'session', values: [{}, null], call: (v) => new EtcdMembership(v as never, 'x') },
  { covers: ['ZkMembershipOptions.acl'], field: 'acl', values: ['world:anyone', 1, []], call: (v) => new ZkMembership(zs, '/x', opt({ acl: v })) },
  { covers: ['RedisMembershipOptions.ttlMs'], field: 'ttlMs', values: [...INT_MS, 0, 29], call: (v) => new RedisMembership(redis, 'x', opt({ ttlMs: v })) },
  { covers: ['RedisMembershipOptions.safetyMarginMs'], field: 'safetyMarginMs', values: [...MS, 0, 700], call: (v) => new RedisMembership(redis, 'x', opt({ ttlMs: 1000, safetyMarginMs: v })) },
  { covers: ['RedisMembershipOptions.keyPrefix'], field: 'keyPrefix', values: [7, 'a\nb', 'a{b', 'x'.repeat(200)], call: (v) => new RedisMembership(redis, 'x', opt({ keyPrefix: v })) },
  { covers: ['RedisMembershipOptions.callTimeoutMs'], field: 'callTimeoutMs', values: INT_MS, call: (v) => new RedisMembership(redis, 'x', opt({ callTimeoutMs: v })) },
  { covers: ['RedisMembershipOptions.logger'], field: 'logger', values: LOGGER, call: (v) => new RedisMembership(redis, 'x', opt({ logger: v })) },
  { covers: ['RedisMembershipOptions.clock'], field: 'clock', values: CLOCK, call: (v) => new RedisMembership(redis, 'x', opt({ clock: v })) },
  { covers: ['RedisMembershipOptions.observeIntervalMs', 'PgMembershipOptions.observeIntervalMs'], field: 'observeIntervalMs', values: [...MS, 5], call: (v) => {
    for (const make of [() => new RedisMembership(redis, 'x', opt({ observeIntervalMs: v })), () => new PgMembership(pool, 'x', opt({ observeIntervalMs: v }))]) {
      let threw: unknown;
      try { make(); } catch (e) { threw = e; }
      if (!(threw instanceof ConfigError) || threw.field !== 'observeIntervalMs') throw threw ?? new Error('accepted');
    }
    throw new ConfigError('observeIntervalMs', 'all refused');
  } },
  // Lifecycle.
  { covers: ['LeadershipManagerOptions.drainTimeoutMs'], field: 'drainTimeoutMs', values: INT_MS, call: (v) => new LeadershipManager(new RedisElection(redis, 'x'), opt({ drainTimeoutMs: v })) },
  { covers: ['LeadershipManagerOptions.backoff'], field: 'backoff', values: ['fast', 1], call: (v) => new LeadershipManager(new RedisElection(redis, 'x'), opt({ backoff: v })) },
  { covers: ['LeadershipManagerOptions.releaseOnReturn'], field: 'releaseOnReturn', values: ['yes', 1, null], call: (v) => new LeadershipManager(new RedisElection(redis, 'x'), opt({ releaseOnReturn: v })) },
  { covers: ['LeadershipManagerOptions.observeLeader'], field: 'observeLeader', values: ['yes', 1, null], call: (v) => new LeadershipManager(new RedisElection(redis, 'x'), opt({ observeLeader: v })) },
  { covers: ['LeadershipManagerOptions.logger'], field: 'logger', values: LOGGER, call: (v) => new LeadershipManager(new RedisElection(redis, 'x'), opt({ logger: v })) },
  { covers: ['arg:lifecycle.candidate'], field: 'candidate', values: [{}, null, 'etcd', { campaign() {} }], call: (v) => new LeadershipManager(v as never) },
  { covers: ['arg:lifecycle.hook'], field: 'hook', values: [1, 'x', null], call: (v) => new LeadershipManager(new RedisElection(redis, 'x')).onElected(v as never) },
  { covers: ['ShutdownOptions.signals'], field: 'signals', values: ['SIGTERM', [], ['SIGNOPE'], [1]], call: (v) => shutdownOnSignals(new LeadershipManager(new RedisElection(redis, 'x')), opt({ signals: v })) },
  { covers: ['ShutdownOptions.exit'], field: 'exit', values: [1, 'exit'], call: (v) => shutdownOnSignals(new LeadershipManager(new RedisElection(redis, 'x')), opt({ exit: v })) },
  { covers: ['arg:lifecycle.managers'], field: 'managers', values: [[], null, {}], call: (v) => shutdownOnSignals(v as never) },
  // ShardManager.
  ...(() => {
    const shardManager = (o: unknown, m: unknown = new RedisMembership(redis, 'x'), f: unknown = () => new RedisElection(redis, 'x')) => new ShardManager(m as never, f as never, o as never);
    return [
      { covers: ['ShardManagerOptions.shards'], field: 'shards', values: [undefined, 0, -1, 1.5, '8', Number.NaN, 2 ** 21, null], call: (v: unknown) => shardManager(v === undefined ? undefined : { shards: v }) },
      { covers: ['ShardManagerOptions.drainTimeoutMs'], field: 'drainTimeoutMs', values: INT_MS, call: (v: unknown) => shardManager({ shards: 4, drainTimeoutMs: v }) },
      { covers: ['ShardManagerOptions.backoff'], field: 'backoff', values: ['fast', 1], call: (v: unknown) => shardManager({ shards: 4, backoff: v }) },
      { covers: ['ShardManagerOptions.settleMs'], field: 'settleMs', values: INT_MS, call: (v: unknown) => shardManager({ shards: 4, settleMs: v }) },
      { covers: ['ShardManagerOptions.logger'], field: 'logger', values: LOGGER, call: (v: unknown) => shardManager({ shards: 4, logger: v }) },
      { covers: ['arg:shards.membership'], field: 'membership', values: [{}, null, 'redis', { join() {} }], call: (v: unknown) => shardManager({ shards: 4 }, v) },
      { covers: ['arg:shards.candidate'], field: 'candidate', values: [{}, null, 'etcd'], call: (v: unknown) => shardManager({ shards: 4 }, undefined, v) },
      { covers: ['arg:shards.hook'], field: 'hook', values: [1, 'x', null], call: (v: unknown) => shardManager({ shards: 4 }).onShardReleased(v as never) },
      { covers: ['ShardManager#whenSettled(options).signal'], field: 'signal', values: SIGNAL, call: (v: unknown) => shardManager({ shards: 4 }).whenSettled(opt({ signal: v })) },
      { covers: ['ShardManager#whenSettled(options).timeoutMs'], field: 'timeoutMs', values: MS, call: (v: unknown) => shardManager({ shards: 4 }).whenSettled(opt({ timeoutMs: v })) },
      { covers: ['InstrumentShardsOptions.group'], field: 'group', values: [7, '', 'x'.repeat(300)], call: (v: unknown) => new TenureMetrics().instrumentShards(shardManager({ shards: 4 }), opt({ group: v })) },
      { covers: ['arg:metrics.shards'], field: 'shards', values: [null, {}, 'shards'], call: (v: unknown) => new TenureMetrics().instrumentShards(v as never) },
    ];
  })(),
  // Leader-only timers, @Leader(), bindLeader.
  { covers: ['arg:lifecycle.intervalMs'], field: 'intervalMs', values: [...INT_MS, 0], call: (v) => new LeadershipManager(new RedisElection(redis, 'x')).every(v as number, () => 1) },
  { covers: ['arg:lifecycle.expression'], field: 'expression', values: ['bad', '* * *', '61 * * * *', '0 0 30 2 *', '', 7, null, 'x'.repeat(2000)], call: (v) => new LeadershipManager(new RedisElection(redis, 'x')).cron(v as string, () => 1) },
  { covers: ['arg:lifecycle.scheduleFn'], field: 'fn', values: [1, 'x', null], call: (v) => new LeadershipManager(new RedisElection(redis, 'x')).every(1000, v as never) },
  { covers: ['CronScheduleOptions.catchUpMs'], field: 'catchUpMs', values: [...INT_MS, -1, 1.5], call: (v) => new LeadershipManager(new RedisElection(redis, 'x')).cron('* * * * *', () => 1, opt({ catchUpMs: v })) },
  { covers: ['CronScheduleOptions.timezone'], field: 'timezone', values: ['Mars/Base', '', 7, 'x'.repeat(200)], call: (v) => new LeadershipManager(new RedisElection(redis, 'x')).cron('* * * * *', () => 1, opt({ timezone: v })) },
  { covers: ['LeaderOptions.election'], field: 'election', values: [undefined, 7, '', 'x'.repeat(300), null], call: (v) => Leader(opt({ election: v }))(class Service {}) },
  { covers: ['LeaderOptions.whenNotLeader'], field: 'whenNotLeader', values: ['maybe', 1, null], call: (v) => Leader(opt({ election: 'x', whenNotLeader: v })) },
  { covers: ['arg:lifecycle.leaderOptions'], field: 'options', values: [7, [], null, true], call: (v) => Leader(v as never) },
  { covers: ['arg:lifecycle.decoratorTarget'], field: 'target', values: [undefined, { get() {} }, 0, { value: 5 }, 'kind:field', 'kind:getter', 'static', 'kind:method:static'], call: (v) => {
    const d = Leader('x') as unknown as (...a: unknown[]) => unknown;
    if (v === 'static') return d(class Service {}, 'run', { value: async () => 1 });
    return typeof v === 'string' ? d(async () => 1, { kind: v.split(':')[1], static: v.endsWith(':static'), name: 'n', addInitializer() {} }) : d({}, 'p', v);
  } },
  { covers: ['arg:lifecycle.service'], field: 'service', values: [null, 7, 'svc'], call: (v) => bindLeader(v as object, new LeadershipManager(new RedisElection(redis, 'x'))) },
  { covers: ['arg:lifecycle.bindManagers'], field: 'managers', values: [null, {}, { x: 1 }, 'm'], call: (v) => {
    @Leader('x')
    class Service {}
    return bindLeader(new Service(), v as never);
  } },
  { covers: ['arg:lifecycle.methodElection'], field: 'election', values: ['bindLeader', 'leadershipModule'], call: (v) => {
    class Unnamed {
      @Leader()
      async run(): Promise<void> {}
    }
    return v === 'bindLeader' ? bindLeader(new Unnamed(), { x: new LeadershipManager(new RedisElection(redis, 'x')) }) : leadershipModule({ candidate: () => undefined as never, services: [Unnamed] });
  } },
  // tenure/metrics.
  { covers: ['TenureMetricsOptions.registry'], field: 'registry', values: [{}, 'registry', 1], call: (v) => new TenureMetrics(opt({ registry: v })) },
  { covers: ['TenureMetricsOptions.buckets'], field: 'buckets', values: [[], [1, 0.5], [-1], 'x', [Number.NaN], [1, 1]], call: (v) => new TenureMetrics(opt({ buckets: v })) },
  { covers: ['InstrumentOptions.election'], field: 'election', values: [7, '', 'x'.repeat(300)], call: (v) => new TenureMetrics().instrument(new LeadershipManager(new RedisElection(redis, 'x')), opt({ election: v })) },
  { covers: ['arg:metrics.manager'], field: 'manager', values: [null, {}, 'manager'], call: (v) => new TenureMetrics().instrument(v as never) },
  // tenure/inversify.
  { covers: ['LeadershipModuleOptions.candidate'], field: 'candidate', values: [undefined, 1, 'etcd'], call: (v) => leadershipModule(opt({ candidate: v })) },
  { covers: ['LeadershipModuleOptions.services'], field: 'services', values: ['Service', [1], [class Plain {}]], call: (v) => leadershipModule(opt({ candidate: () => undefined, services: v })) },
  { covers: ['LeadershipModuleOptions.elections'], field: 'elections', values: ['x', [''], [7]], call: (v) => leadershipModule(opt({ candidate: () => undefined, elections: v })) },
  { covers: ['LeadershipModuleOptions.manager'], field: 'manager', values: ['fast', 1], call: (v) => leadershipModule(opt({ candidate: () => undefined, manager: v })) },
  { covers: ['arg:inversify.election'], field: 'election', values: [7, '', null], call: (v) => leadershipManagerId(v as string) },
  // tenure/nestjs (and bindLeader's default election, which its module uses).
  { covers: ['BindLeaderOptions.defaultElection'], field: 'defaultElection', values: [7, '', 'x'.repeat(300), null], call: (v) => {
    @Leader('x')
    class Service {}
    return bindLeader(new Service(), { x: new LeadershipManager(new RedisElection(redis, 'x')) }, opt({ defaultElection: v }));
  } },
  { covers: ['TenureElectionOptions.candidate'], field: 'candidate', values: [undefined, 1, 'etcd', {}, null], call: (v) => TenureModule.forRoot(opt({ candidate: v })) },
  { covers: ['TenureElectionOptions.candidateFactory'], field: 'candidateFactory', values: [1, 'f', {}, null], call: (v) => TenureModule.forRoot(opt({ candidateFactory: v })) },
  { covers: ['TenureModuleOptions.name', 'TenureModuleAsyncOptions.name'], field: 'name', values: [7, '', 'x'.repeat(300), null, 'async:7', 'async:'], call: (v) =>
    typeof v === 'string' && v.startsWith('async:') ? TenureModule.forRootAsync(opt({ name: v === 'async:7' ? 7 : '', useFactory: () => ({}) })) : TenureModule.forRoot(opt({ name: v, candidate: new RedisElection(redis, 'x') })) },
  { covers: ['TenureModuleOptions.global', 'TenureModuleAsyncOptions.global'], field: 'global', values: ['yes', 1, null, 'async'], call: (v) =>
    v === 'async' ? TenureModule.forRootAsync(opt({ global: 'no', useFactory: () => ({}) })) : TenureModule.forRoot(opt({ global: v, candidate: new RedisElection(redis, 'x') })) },
  { covers: ['TenureModuleAsyncOptions.imports'], field: 'imports', values: ['M', 1, {}, null], call: (v) => TenureModule.forRootAsync(opt({ imports: v, useFactory: () => ({}) })) },
  { covers: ['TenureModuleAsyncOptions.inject'], field: 'inject', values: ['T', 1, {}, null], call: (v) => TenureModule.forRootAsync(opt({ inject: v, useFactory: () => ({}) })) },
  { covers: ['TenureModuleAsyncOptions.useFactory'], field: 'useFactory', values: [undefined, 1, 'f', {}], call: (v) => TenureModule.forRootAsync(opt({ useFactory: v })) },
  { covers: ['LeadershipService#resign(options).cooldownMs'], field: 'cooldownMs', values: INT_MS, call: (v) => new LeadershipService('x', new LeadershipManager(new RedisElection(redis, 'x'))).resign(opt({ cooldownMs: v })) },
  { covers: ['LeadershipHealthOptions.elections'], field: 'elections', values: ['x', [], [7], ['nope'], null], call: (v) => new LeadershipHealthIndicator(opt({ elections: new Map() })).isHealthy('leadership', opt({ elections: v })) },
  { covers: ['LeadershipHealthOptions.timeoutMs'], field: 'timeoutMs', values: [...INT_MS, 0], call: (v) => new LeadershipHealthIndicator(opt({ elections: new Map() })).isHealthy('leadership', opt({ timeoutMs: v })) },
  { covers: ['arg:nestjs.healthKey'], field: 'key', values: [7, '', 'x'.repeat(300), null], call: (v) => new LeadershipHealthIndicator(opt({ elections: new Map() })).isHealthy(v as string) },
  { covers: ['arg:nestjs.election'], field: 'election', values: [7, '', 'x'.repeat(300), null, 'inject:7'], call: (v) => (v === 'inject:7' ? InjectLeadership(7 as never) : getLeadershipToken(v as string)) },
  // Core.
  { covers: ['arg:core.fence'], field: 'fence', values: [-1n, 1, '1', null], call: (v) => new InMemoryFencedResource('r').write(v as bigint, () => 1) },
  { covers: ['arg:core.resourceName'], field: 'name', values: [7, ''], call: (v) => new InMemoryFencedResource(v as string) },
];

describe('bad input', () => {
  it('every public option has a row in this table', () => {
    const covered = new Set(rows().flatMap((r) => r.covers));
    expect(publicApi().options.filter((p) => !covered.has(p))).toEqual([]);
  }, 60_000);

  it('every bad value of every row ends in a ConfigError naming its field, and nothing else', async () => {
    const failures: string[] = [];
    for (const row of rows()) {
      for (const v of row.values) {
        let outcome: unknown;
        try {
          await row.call(v);
          outcome = 'accepted';
        } catch (e) {
          outcome = e;
        }
        const label = typeof v === 'string' && v.length > 20 ? `'${v.slice(0, 8)}…'(${v.length})` : Buffer.isBuffer(v) ? `Buffer(${v.length})` : typeof v === 'bigint' ? `${v}n` : typeof v === 'symbol' ? 'Symbol' : JSON.stringify(v) ?? String(v);
        if (!(outcome instanceof ConfigError)) failures.push(`${row.covers[0]} = ${label}: ${outcome instanceof Error ? `${outcome.name}: ${outcome.message}` : String(outcome)}`);
        else if (outcome.field !== row.field) failures.push(`${row.covers[0]} = ${label}: field '${outcome.field}', expected '${row.field}'`);
      }
    }
    expect(failures).toEqual([]);
  }, 120_000);
});
