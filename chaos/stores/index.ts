import { EtcdStore } from './etcd.js';
import { PostgresStore } from './postgres.js';
import { RedisStore } from './redis.js';
import type { Backend, ChaosStore } from './types.js';
import { ZkStore } from './zk.js';

export function makeStore(backend: Backend): ChaosStore {
  switch (backend) {
    case 'etcd':
      return new EtcdStore();
    case 'zk':
      return new ZkStore();
    case 'redis':
      return new RedisStore();
    case 'postgres':
      return new PostgresStore();
  }
}
export { BACKENDS, type Backend, type ChaosStore, type StoreFault } from './types.js';
