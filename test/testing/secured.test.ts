import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Redis, Cluster } from 'ioredis';
import pg from 'pg';
import { Etcd3 } from 'etcd3';
import { noop } from 'cockatiel';
import {
  EtcdServer,
  PgBouncerServer,
  PostgresServer,
  RedisCluster,
  RedisServer,
  makeCertificates,
  type TestCertificates,
} from '../../src/testing/index.js';
import { postgresUser } from '../../src/testing/postgres.js';

/** The kit's secured, pooled, replicated and clustered servers answer real clients. */
describe('kit: secured, pooled, replicated and clustered servers', () => {
  let certs: TestCertificates;
  beforeAll(async () => {
    certs = await makeCertificates(postgresUser());
  });

  it('Redis over TLS with an ACL user: the user is refused a key outside its pattern', async () => {
    await using redis = await new RedisServer({ tls: certs, aclUsers: ['app on >app-secret ~app:* +get +set'] }).start();
    const c = new Redis({ ...redis.endpoint, tls: redis.tlsOptions, username: 'app', password: 'app-secret', lazyConnect: true, maxRetriesPerRequest: 0, enableReadyCheck: false });
    try {
      await c.connect();
      await c.set('app:x', '1');
      expect(await c.get('app:x')).toBe('1');
      await expect(c.set('other:x', '1')).rejects.toThrow(/NOPERM/);
      // The plain port is off.
      expect(redis.connectionString).toMatch(/^rediss:/);
    } finally {
      c.disconnect();
    }
  });

  it('a Redis replica follows its primary and promote() makes it a primary with a new replication id', async () => {
    await using primary = await new RedisServer().start();
    await using replica = await new RedisServer({ replicaOf: { port: primary.port } }).start();
    await replica.waitForSync();
    expect(await replica.role()).toBe('slave');
    const before = /master_replid:(\w+)/.exec(await replica.command('INFO', 'replication'))?.[1];
    await replica.promote();
    expect(await replica.role()).toBe('master');
    const after = /master_replid:(\w+)/.exec(await replica.command('INFO', 'replication'))?.[1];
    expect(after).not.toBe(before);
  });

  it('a Redis Cluster of 3 primaries serves ioredis Cluster, and moveSlot() sends MOVED', async () => {
    await using cluster = await new RedisCluster().start();
    const c = new Cluster(cluster.nodes, { lazyConnect: true });
    try {
      await c.connect();
      await c.set('{k}a', '1');
      const slot = Number((await c.cluster('KEYSLOT', '{k}a')) as number);
      const from = await cluster.ownerOf(slot);
      const to = cluster.members.find((m) => m !== from)!;
      await cluster.moveSlot(slot, to);
      expect(await cluster.ownerOf(slot)).toBe(to);
      expect(await c.get('{k}a')).toBe('1'); // followed the MOVED
    } finally {
      c.disconnect();
    }
  });

  describe('Postgres with ssl=on and a plain role, and PgBouncer in front', () => {
    const postgres = new PostgresServer({ hba: ['hostssl all app 127.0.0.1/32 scram-sha-256', 'host all app 127.0.0.1/32 scram-sha-256'] });
    let bouncers: PgBouncerServer[] = [];
    beforeAll(async () => {
      await postgres.start();
      const admin = new pg.Client(postgres.connectionConfig);
      await admin.connect();
      await admin.query("CREATE ROLE app LOGIN PASSWORD 'app-secret'");
      await admin.end();
      bouncers = [
        new PgBouncerServer({ postgres, poolMode: 'transaction', users: { app: 'app-secret' } }),
        new PgBouncerServer({ postgres, poolMode: 'session', users: { app: 'app-secret' } }),
      ];
      await Promise.all(bouncers.map((b) => b.start()));
    });
    afterAll(async () => {
      await Promise.all(bouncers.map((b) => b.stop()));
      await postgres.stop();
    });

    it('the plain role logs in with its password and is no superuser', async () => {
      const c = new pg.Client({ ...postgres.connectionConfig, user: 'app', password: 'app-secret' });
      await c.connect();
      try {
        const r = await c.query<{ su: string }>("SELECT current_setting('is_superuser') AS su");
        expect(r.rows[0]!.su).toBe('off');
      } finally {
        await c.end();
      }
      const bad = new pg.Client({ ...postgres.connectionConfig, user: 'app', password: 'wrong' });
      await expect(bad.connect()).rejects.toThrow(/password authentication failed/);
    });

    it('PgBouncer in transaction mode hands statements of one client to different backends', async () => {
      const [tx] = bouncers;
      const pool = new pg.Pool({ ...tx!.connectionConfig('app'), max: 4 });
      try {
        const c = await pool.connect();
        // Hold one server connection in a transaction so the next statement needs another.
        const other = await pool.connect();
        await other.query('BEGIN');
        const a = (await other.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
        const b = (await c.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
        expect(b).not.toBe(a);
        // The backend key the client got is PgBouncer's, not a backend's pid.
        expect((c as unknown as { processID: number }).processID).not.toBe(b);
        await other.query('COMMIT');
        other.release();
        c.release();
        expect(await tx!.admin('SHOW POOLS;')).toMatch(/transaction/);
      } finally {
        await pool.end();
      }
    });

    it('PgBouncer in session mode keeps one backend per client', async () => {
      const [, session] = bouncers;
      const c = new pg.Client(session!.connectionConfig('app'));
      await c.connect();
      try {
        const a = (await c.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
        const b = (await c.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
        expect(b).toBe(a);
      } finally {
        await c.end();
      }
    });
  });

  it('Postgres serves TLS with the test CA', async () => {
    await using postgres = await new PostgresServer({ ssl: certs }).start();
    const c = new pg.Client({ ...postgres.connectionConfig, ssl: { ca: certs.ca, servername: 'localhost' } });
    await c.connect();
    try {
      const r = await c.query<{ ssl: boolean }>('SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()');
      expect(r.rows[0]!.ssl).toBe(true);
    } finally {
      await c.end();
    }
  });

  it('etcd over mutual TLS with auth: a prefix role reads its prefix and nothing else', async () => {
    await using etcd = await new EtcdServer({ tls: certs }).start();
    await etcd.enableAuth('root-secret', [{ name: 'app', prefix: 'app/' }]);
    const c = new Etcd3({ hosts: etcd.endpoints, credentials: etcd.credentials, auth: { username: 'app', password: 'app-secret' }, faultHandling: { global: noop, host: () => noop } });
    try {
      await c.put('app/x').value('1');
      expect(await c.get('app/x').string()).toBe('1');
      await expect(c.put('other/x').value('1')).rejects.toThrow(/permission denied/i);
    } finally {
      c.close();
    }
  });
});
