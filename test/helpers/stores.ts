/**
 * One way for tests (and their child processes) to reach any of the four stores with one session
 * or client: memberships and candidates by a plain name (`a/b`: an etcd prefix, the ZooKeeper
 * path `/a/b`, a Redis or Postgres name), all on the one session, pool or client of the kit.
 */
import { Redis } from 'ioredis';
import pg from 'pg';
import type { Candidate, Membership } from '../../src/index.js';
import { createEtcdClient, EtcdElection, EtcdMembership, EtcdSession } from '../../src/recipes/etcd/index.js';
import { LeaderLatch, ZkMembership, ZkSession } from '../../src/recipes/zk/index.js';
import { RedisElection, RedisMembership } from '../../src/recipes/redis/index.js';
import { PgElection, PgMembership } from '../../src/recipes/postgres/index.js';

export type Backend = 'etcd' | 'zk' | 'redis' | 'postgres';
export const ALL_BACKENDS: readonly Backend[] = ['etcd', 'zk', 'redis', 'postgres'];

/** Where a store is: what a child process gets as JSON. */
export type StoreSpec = { backend: 'etcd'; hosts: string[] } | { backend: 'zk'; connectionString: string } | { backend: 'redis'; port: number } | { backend: 'postgres'; port: number };

/** Per-backend settings a test picks: the TTL every lease and session gets, and the observers' re-read interval. */
export interface KitTiming {
  ttlMs: number;
  /** Redis and Postgres observers re-read at least this often (etcd and ZooKeeper watch). @default 200 */
  observeIntervalMs?: number;
  /** Connections of a Postgres kit's pool. @default 20 */
  poolSize?: number;
}

export interface StoreKit {
  readonly backend: Backend;
  /** A membership of `group` (options are passed as given: bad ones must throw). */
  membership(group: string, options?: Record<string, unknown>): Membership;
  /** A candidate on `name` with `id`. */
  candidate(name: string, id: string): Candidate;
  /** Closes the session, client or pool (every membership and candidate on it goes with it). */
  close(): Promise<void>;
}

export async function openStore(spec: StoreSpec, timing: KitTiming): Promise<StoreKit> {
  const { ttlMs } = timing;
  const observeIntervalMs = timing.observeIntervalMs ?? 200;
  switch (spec.backend) {
    case 'etcd': {
      const client = await createEtcdClient({ hosts: spec.hosts });
      const session = await EtcdSession.create({ client, ttlMs });
      return {
        backend: 'etcd',
        membership: (group, o) => new EtcdMembership(session, group, o as never),
        candidate: (name, id) => new EtcdElection(session, name, { id }),
        async close() {
          await session.close();
          client.close();
        },
      };
    }
    case 'zk': {
      const session = await ZkSession.create({ connectionString: spec.connectionString, ttlMs });
      return {
        backend: 'zk',
        membership: (group, o) => new ZkMembership(session, `/${group}`, o as never),
        candidate: (name, id) => new LeaderLatch(session, `/${name}`, { id }),
        close: () => session.close(),
      };
    }
    case 'redis': {
      const redis = new Redis({ host: '127.0.0.1', port: spec.port, maxRetriesPerRequest: 1 });
      redis.on('error', () => undefined);
      return {
        backend: 'redis',
        membership: (group, o) => new RedisMembership(redis, group, { ttlMs, observeIntervalMs, ...o } as never),
        candidate: (name, id) => new RedisElection(redis, name, { id, ttlMs, restartGuardMs: 0, retryMaxMs: 200, observeIntervalMs }),
        async close() {
          redis.disconnect();
        },
      };
    }
    case 'postgres': {
      const pool = new pg.Pool({ host: '127.0.0.1', port: spec.port, user: 'postgres', database: 'postgres', max: timing.poolSize ?? 20 });
      pool.on('error', () => undefined);
      return {
        backend: 'postgres',
        membership: (group, o) => new PgMembership(pool, group, { ttlMs, observeIntervalMs, ...o } as never),
        candidate: (name, id) => new PgElection(pool, name, { id, ttlMs, backoff: { initialMs: 20, maxMs: 200 }, observeIntervalMs }),
        close: () => pool.end(),
      };
    }
  }
}
