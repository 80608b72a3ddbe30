import { PostgresServer } from '../../src/testing/index.js';
import { EtcdStore } from './etcd.js';
import { PostgresStore } from './postgres.js';
import { RedisStore } from './redis.js';
import type { Backend, ChaosStore } from './types.js';
import { ZkStore } from './zk.js';

/** The store of a run; `shards` > 0 for the shard kind (Postgres then allows a connection per held shard). */
export function makeStore(backend: Backend, shards = 0): ChaosStore {
  switch (backend) {
    case 'etcd':
      return new EtcdStore();
    case 'zk':
      return new ZkStore();
    case 'redis':
      return new RedisStore();
    case 'postgres':
      return new PostgresStore(new PostgresServer({ settings: { synchronous_commit: 'on', ...(shards > 0 ? { max_connections: shards + 300 } : {}) } }));
  }
}
export { BACKENDS, type Backend, type ChaosStore, type StoreFault } from './types.js';
