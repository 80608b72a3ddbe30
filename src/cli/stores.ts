import type { Candidate } from '../core/candidate.js';
import { ConfigError, MissingPeerError } from '../core/errors.js';
import type { Lease } from '../core/lease.js';
import type { WaitOptions } from '../core/options.js';
import type { BackendName } from './args.js';

/** A mutex as the CLI uses it: every backend's lock recipe has this shape. */
export interface CliLock {
  acquire(options?: WaitOptions): Promise<Lease>;
  close(): Promise<void>;
}

/** One connection to a store, and the recipes the CLI builds on it. */
export interface Store {
  /** An election (the backend's Candidate) on `name`. */
  candidate(name: string, id: string): Candidate;
  /** A mutex on `name`. */
  lock(name: string, id: string): CliLock;
  /** Closes the connection (for etcd, revokes the session's lease). */
  close(): Promise<void>;
}

export interface StoreOptions {
  ttlMs: number;
  /** Bound on reaching the store at start-up and on each call. */
  callTimeoutMs: number;
}

/** Which CLI flag a recipe's option comes from, so a ConfigError names what the user typed. */
const FLAG_OF: Record<string, string> = { ttlMs: '--ttl', safetyMarginMs: '--ttl', hosts: '--endpoints', connectionString: '--endpoints', name: '--name', path: '--name', id: '--id' };

/** Rewrites a recipe's ConfigError (and a missing client package) in the CLI's own words. */
export function asFlagError(e: unknown, backend: BackendName): unknown {
  if (e instanceof ConfigError && FLAG_OF[e.field]) return new ConfigError(FLAG_OF[e.field]!, e.message.slice(e.field.length + 2), { cause: e });
  if (e instanceof MissingPeerError) return new ConfigError('--backend', `${backend} needs the package ${e.packageName} (npm install ${e.packageName})`, { cause: e });
  return e;
}

function single(backend: BackendName, endpoints: string[]): string {
  if (endpoints.length !== 1) throw new ConfigError('--endpoints', `${backend} takes one endpoint (a single node), got ${endpoints.length}`);
  return endpoints[0]!;
}

function hostPort(endpoint: string): { host: string; port: number } | undefined {
  const m = /^([^:/]+):(\d{1,5})$/.exec(endpoint);
  return m ? { host: m[1]!, port: Number(m[2]) } : undefined;
}

/** ZooKeeper names are paths: `billing` becomes `/billing`. */
const zkPath = (name: string): string => (name.startsWith('/') ? name : `/${name}`);

/**
 * Connects to the store. Each backend's entry point is loaded only here, so `tenure --help` and
 * the backends you do not use need none of the other client packages.
 */
export async function openStore(backend: BackendName, endpoints: string[], o: StoreOptions): Promise<Store> {
  try {
    return await open(backend, endpoints, o);
  } catch (e) {
    throw asFlagError(e, backend);
  }
}

async function open(backend: BackendName, endpoints: string[], o: StoreOptions): Promise<Store> {
  switch (backend) {
    case 'etcd': {
      const { EtcdSession, EtcdElection, EtcdMutex } = await import('../recipes/etcd/index.js');
      const hosts = endpoints.map((e) => (/^[a-z]+:\/\//.test(e) ? e : `http://${e}`));
      const session = await EtcdSession.create({ hosts, ttlMs: o.ttlMs, callTimeoutMs: o.callTimeoutMs });
      return {
        candidate: (name, id) => new EtcdElection(session, name, { id }),
        lock: (name) => new EtcdMutex(session, name),
        close: () => session.close(),
      };
    }
    case 'zk': {
      const { ZkSession, LeaderLatch, InterProcessMutex } = await import('../recipes/zk/index.js');
      const session = await ZkSession.create({ connectionString: endpoints.join(','), ttlMs: o.ttlMs, connectTimeoutMs: o.callTimeoutMs });
      return {
        candidate: (name, id) => new LeaderLatch(session, zkPath(name), { id }),
        lock: (name, id) => new InterProcessMutex(session, zkPath(name), { id }),
        close: () => session.close(),
      };
    }
    case 'redis': {
      const endpoint = single(backend, endpoints);
      const { RedisElection, RedisLock } = await import('../recipes/redis/index.js');
      const { Redis } = await import('ioredis');
      const at = hostPort(endpoint);
      if (!at && !/^rediss?:\/\//.test(endpoint)) throw new ConfigError('--endpoints', `'${endpoint}' is not host:port or a redis:// URL`);
      const redis = at ? new Redis({ ...at, lazyConnect: true }) : new Redis(endpoint, { lazyConnect: true });
      redis.on('error', () => undefined); // every call is bounded and reports its own failure
      const lockOptions = { ttlMs: o.ttlMs, callTimeoutMs: o.callTimeoutMs };
      return {
        candidate: (name, id) => new RedisElection(redis, name, { ...lockOptions, id }),
        lock: (name, id) => new RedisLock(redis, name, { ...lockOptions, id }),
        close: async () => void redis.disconnect(),
      };
    }
    case 'postgres': {
      const endpoint = single(backend, endpoints);
      const { PgElection, PgSessionLock } = await import('../recipes/postgres/index.js');
      const { default: pg } = await import('pg');
      const at = hostPort(endpoint);
      if (!at && !/^postgres(ql)?:\/\//.test(endpoint)) throw new ConfigError('--endpoints', `'${endpoint}' is not host:port or a postgres:// URL`);
      // User, password and database come from the URL or from PGUSER, PGPASSWORD, PGDATABASE.
      const pool = new pg.Pool({ ...(at ?? { connectionString: endpoint }), connectionTimeoutMillis: o.callTimeoutMs });
      pool.on('error', () => undefined);
      const lockOptions = { ttlMs: o.ttlMs, callTimeoutMs: o.callTimeoutMs };
      return {
        candidate: (name, id) => new PgElection(pool, name, { ...lockOptions, id }),
        lock: (name, id) => new PgSessionLock(pool, name, { ...lockOptions, id }),
        close: () => pool.end(),
      };
    }
  }
}
