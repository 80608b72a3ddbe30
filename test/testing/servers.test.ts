import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import {
  EtcdCluster,
  EtcdServer,
  PostgresServer,
  RedisServer,
  ZooKeeperEnsemble,
  ZooKeeperServer,
} from '../../src/testing/index.js';
import { etcdClient, isAlive, pgClient, redisClient, zkClient, zkCreate, zkGet } from '../helpers/clients.js';
import { eventually } from '../helpers/wait.js';
import { liveResources, processStartTime } from '../../src/testing/registry.js';


describe('single servers and 3-member clusters', () => {
  const zk = new ZooKeeperServer();
  const etcd = new EtcdServer();
  const redis = new RedisServer();
  const postgres = new PostgresServer();
  const ensemble = new ZooKeeperEnsemble();
  const cluster = new EtcdCluster();
  const all = [zk, etcd, redis, postgres, ensemble, cluster];

  beforeAll(async () => {
    await Promise.all(all.map((s) => s.start()));
  });
  afterAll(async () => {
    await Promise.all(all.map((s) => s.stop()));
  });

  it('all start in parallel, each on its own loopback ports', () => {
    const ports = [zk.port, etcd.clientPort, etcd.peerPort, redis.port, postgres.port,
      ...ensemble.members.map((m) => m.port), ...cluster.members.flatMap((m) => [m.clientPort, m.peerPort])];
    expect(new Set(ports).size).toBe(ports.length);
  });

  it('ZooKeeper answers a real client', async () => {
    const c = await zkClient(zk.connectionString);
    try {
      await zkCreate(c, '/kit', 'hello');
      expect(await zkGet(c, '/kit')).toBe('hello');
      expect(await zk.mode()).toBe('standalone');
    } finally {
      c.close();
    }
  });

  it('ZooKeeper runs with the heap maxHeapMb asks for (the JVM gets -Xmx<maxHeapMb>m) and serves', async () => {
    const big = await new ZooKeeperServer({ maxHeapMb: 1024 }).start();
    try {
      const cmdline = readFileSync(`/proc/${big.pid}/cmdline`, 'utf8').split('\0');
      expect(cmdline).toContain('-Xmx1024m');
      expect(cmdline).not.toContain('-Xmx256m');
      expect(await big.mode()).toBe('standalone');
      expect(readFileSync(`/proc/${zk.pid}/cmdline`, 'utf8').split('\0')).toContain('-Xmx256m'); // the default
    } finally {
      await big.stop();
    }
  });

  it('etcd answers a real client', async () => {
    const c = etcdClient(etcd.endpoints);
    try {
      await c.put('kit').value('hello');
      expect(await c.get('kit').string()).toBe('hello');
    } finally {
      c.close();
    }
  });

  it('Redis answers a real client', async () => {
    const c = redisClient(redis.port);
    try {
      await c.connect();
      await c.set('kit', 'hello');
      expect(await c.get('kit')).toBe('hello');
      // no persistence configured
      expect(await c.config('GET', 'save')).toEqual(['save', '']);
    } finally {
      c.disconnect();
    }
  });

  it('Postgres answers a real client, running as a non-root user', async () => {
    const c = pgClient(postgres.connectionConfig);
    await c.connect();
    try {
      const r = await c.query<{ v: number; u: string }>('select 1 as v, current_user as u');
      expect(r.rows[0]).toEqual({ v: 1, u: 'postgres' });
      expect(postgres.connectionString).toBe(`postgres://postgres@127.0.0.1:${postgres.port}/postgres`);
    } finally {
      await c.end();
    }
  });

  it('the ZooKeeper ensemble has one leader and replicates writes', async () => {
    const leader = await ensemble.waitForLeader();
    const modes = await Promise.all(ensemble.members.map((m) => m.mode()));
    expect(modes.filter((m) => m === 'leader')).toHaveLength(1);
    expect(modes.filter((m) => m === 'follower')).toHaveLength(2);
    const follower = ensemble.members.find((m) => m !== leader)!;
    const a = await zkClient(leader.connectionString);
    const b = await zkClient(follower.connectionString);
    try {
      await zkCreate(a, '/replicated', 'x');
      // A follower may serve a read before it has applied the write: read until it has.
      expect(await eventually(() => zkGet(b, '/replicated'))).toBe('x');
    } finally {
      a.close();
      b.close();
    }
  });

  it('the etcd cluster has one leader and replicates writes', async () => {
    const leader = await cluster.waitForLeader();
    const follower = cluster.members.find((m) => m !== leader)!;
    const a = etcdClient(leader.endpoints);
    const b = etcdClient(follower.endpoints);
    try {
      await a.put('replicated').value('x');
      expect(await b.get('replicated').string()).toBe('x');
    } finally {
      a.close();
      b.close();
    }
  });

  it('Postgres: a hard restart with backends busy starts again every time (kill waits for every backend, not only the postmaster)', async () => {
    // A backend outlived its SIGKILLed postmaster by a moment, still attached to the old shared
    // memory, and the start right after refused ("pre-existing shared memory block is still in use").
    for (let round = 0; round < 5; round++) {
      const clients = Array.from({ length: 20 }, () => pgClient(postgres.connectionConfig));
      await Promise.all(clients.map((c) => c.connect()));
      for (const c of clients) c.on('error', () => undefined);
      const busy = clients.map((c) => c.query('SELECT pg_sleep(30)').catch(() => undefined));
      const look = pgClient(postgres.connectionConfig);
      await look.connect();
      look.on('error', () => undefined);
      const backends = (await look.query("SELECT pid FROM pg_stat_activity WHERE query LIKE 'SELECT pg_sleep%'")).rows.map((r: { pid: number }) => r.pid);
      expect(backends.length).toBeGreaterThan(0); // the sleeps may not all have started yet
      await postgres.kill();
      // Every backend is gone (or a zombie, its memory released) once kill() resolves.
      expect(backends.filter((pid) => processStartTime(pid) !== undefined)).toEqual([]);
      await postgres.start();
      await Promise.all(busy);
      const p = pgClient(postgres.connectionConfig);
      await p.connect();
      expect((await p.query('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
      await p.end();
    }
  });

  it('restart keeps data in the same data dir (etcd, ZooKeeper, Postgres); Redis keeps none', async () => {
    const e = etcdClient(etcd.endpoints);
    await e.put('survives').value('yes');
    e.close();
    const z = await zkClient(zk.connectionString);
    await zkCreate(z, '/survives', 'yes');
    z.close();
    const p = pgClient(postgres.connectionConfig);
    await p.connect();
    await p.query('create table survives (v text); insert into survives values ($1)', ['yes']).catch(async () => {
      await p.query('create table survives (v text)');
      await p.query("insert into survives values ('yes')");
    });
    await p.end();
    const r = redisClient(redis.port);
    await r.connect();
    await r.set('survives', 'yes');
    r.disconnect();

    const pids = [etcd.pid, zk.pid, postgres.pid, redis.pid];
    await Promise.all([etcd.restart({ hard: true }), zk.restart({ hard: true }), postgres.restart(), redis.restart({ hard: true })]);
    expect([etcd.pid, zk.pid, postgres.pid, redis.pid].every((pid, i) => pid !== pids[i])).toBe(true);

    const e2 = etcdClient(etcd.endpoints);
    expect(await e2.get('survives').string()).toBe('yes');
    e2.close();
    const z2 = await zkClient(zk.connectionString);
    expect(await zkGet(z2, '/survives')).toBe('yes');
    z2.close();
    const p2 = pgClient(postgres.connectionConfig);
    await p2.connect();
    expect((await p2.query('select v from survives')).rows).toEqual([{ v: 'yes' }]);
    await p2.end();
    const r2 = redisClient(redis.port);
    await r2.connect();
    expect(await r2.get('survives')).toBeNull();
    r2.disconnect();
  });
});

describe('stop', () => {
  it('ends the process and removes the data dir; a second stop is a no-op', async () => {
    const redis = await new RedisServer().start();
    const pid = redis.pid!;
    const dir = redis.dir;
    expect(isAlive(pid)).toBe(true);
    await redis.stop();
    await redis.stop();
    expect(isAlive(pid)).toBe(false);
    expect(existsSync(dir)).toBe(false);
    await expect(redis.start()).rejects.toMatchObject({ code: 'CLOSED' });
  });

  it("once its servers stopped, a process's exit handler has a few files to remove, not a data dir (Postgres keeps its template as one archive): a runner's SIGKILL 500 ms after SIGTERM does not cut it short", async () => {
    const postgres = await new PostgresServer().start();
    await postgres.stop();
    const left = liveResources().dirs.flatMap((d) => readdirSync(d, { recursive: true, encoding: 'utf8' }));
    expect(left.length, left.join('\n')).toBeLessThanOrEqual(3);
  });

  it('a cluster stop ends every member and removes every dir', async () => {
    const cluster = await new EtcdCluster().start();
    const pids = cluster.members.map((m) => m.pid!);
    const dirs = cluster.members.map((m) => m.dir);
    await cluster.stop();
    expect(pids.some(isAlive)).toBe(false);
    expect(dirs.some((d) => existsSync(d))).toBe(false);
  });
});
