/** Thin promise wrappers over the real clients, for tests of the kit and the recipes. */
import zookeeper from 'node-zookeeper-client';
import { Etcd3 } from 'etcd3';
import { Redis } from 'ioredis';
import pg from 'pg';
import { noop } from 'cockatiel';

export async function zkClient(connectionString: string, sessionTimeout = 4000): Promise<zookeeper.Client> {
  const client = zookeeper.createClient(connectionString, { sessionTimeout, spinDelay: 100, retries: 0 });
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`zk: no connection to ${connectionString} within 15 s`)), 15_000);
    client.once('connected', () => {
      clearTimeout(timer);
      resolve();
    });
    client.connect();
  });
  return client;
}

export function zkCreate(client: zookeeper.Client, path: string, data: string): Promise<string> {
  return new Promise((resolve, reject) =>
    client.create(path, Buffer.from(data), (err, p) => (err ? reject(err) : resolve(p))),
  );
}

export function zkGet(client: zookeeper.Client, path: string): Promise<string> {
  return new Promise((resolve, reject) =>
    client.getData(path, (err, data) => (err ? reject(err) : resolve(data?.toString('utf8') ?? ''))),
  );
}

export function etcdClient(hosts: string[]): Etcd3 {
  // No circuit breaker and no retries: the kit tests want to see each failure as it happens.
  return new Etcd3({ hosts, dialTimeout: 2000, faultHandling: { global: noop, host: () => noop } });
}

export function redisClient(port: number, extra: Record<string, unknown> = {}): Redis {
  return new Redis({ host: '127.0.0.1', port, lazyConnect: true, maxRetriesPerRequest: 1, ...extra });
}

export function pgClient(config: { host: string; port: number; user: string; database: string }): pg.Client {
  return new pg.Client(config);
}


/** True while a process with this PID exists. */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
