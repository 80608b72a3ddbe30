import { afterAll, beforeAll } from 'vitest';
import { EtcdServer, PostgresServer, RedisServer, ZooKeeperServer } from '../../src/testing/index.js';
import type { StoreSpec } from '../helpers/stores.js';
import type { MembershipBackend } from './membership.js';

/**
 * The four stores of a contract file (Membership, ShardManager): one real server each, started
 * before the file's tests and stopped after; each backend says where its server is, directly or
 * through a proxy's port. TTL 2 s; Redis and Postgres observers re-read every 200 ms.
 */
export function fourStores(): Record<string, () => MembershipBackend> {
  let etcd: EtcdServer;
  let zk: ZooKeeperServer;
  let redis: RedisServer;
  let postgres: PostgresServer;
  beforeAll(async () => {
    [etcd, zk, redis, postgres] = await Promise.all([new EtcdServer().start(), new ZooKeeperServer().start(), new RedisServer().start(), new PostgresServer().start()]);
  });
  afterAll(async () => {
    await Promise.all([etcd?.stop(), zk?.stop(), redis?.stop(), postgres?.stop()]);
  });
  const timing = { ttlMs: 2000, observeIntervalMs: 200 };
  return {
    etcd: () => ({ timing, port: () => etcd.clientPort, spec: (port = etcd.clientPort): StoreSpec => ({ backend: 'etcd', hosts: [`http://127.0.0.1:${port}`] }) }),
    ZooKeeper: () => ({ timing, port: () => zk.port, spec: (port = zk.port): StoreSpec => ({ backend: 'zk', connectionString: `127.0.0.1:${port}` }) }),
    Redis: () => ({ timing, port: () => redis.port, spec: (port = redis.port): StoreSpec => ({ backend: 'redis', port }) }),
    Postgres: () => ({ timing, port: () => postgres.port, spec: (port = postgres.port): StoreSpec => ({ backend: 'postgres', port }) }),
  };
}
