import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import zookeeper from 'node-zookeeper-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GRANTS_SQL, SCHEMA_SQL } from '../../src/recipes/postgres/index.js';
import { EtcdServer, PostgresServer, RedisServer, ZooKeeperServer, makeCertificates, type TestCertificates } from '../../src/testing/index.js';
import { postgresUser } from '../../src/testing/postgres.js';
import { zkClient } from '../helpers/clients.js';
import { ChildLog, exitOf, killAll, tenure, type Tenure } from './helpers.js';

/**
 * `tenure run|lock|leader` on secured stores (etcd mutual TLS + a role per prefix, Redis TLS + an
 * ACL user, Postgres ssl + SCRAM + a plain role in its own schema, ZooKeeper digest ACLs): the
 * secrets come from a file or the environment, never the command line; the command does not
 * inherit them; no message carries them.
 */
const SECRET = 'cli-Pa55-word';
/** The command: prints what it got of tenure's environment, as one JSON line. */
const SHOW_ENV = [process.execPath, '-e', 'const e = process.env; console.log(JSON.stringify({ fence: e.TENURE_FENCE, TENURE_PASSWORD: e.TENURE_PASSWORD, PGPASSWORD: e.PGPASSWORD, TENURE_ENDPOINTS: e.TENURE_ENDPOINTS }))'];
const REDIS_ACL = '~tenure:* &tenure:* +evalsha +eval +subscribe +unsubscribe +ping +info +hget +time +get +set +exists +incr +incrby +zrange +zrangebyscore +zrem +zadd +zscore +pexpire +pttl +del +publish +hmget +hset';

let certs: TestCertificates;
let pgCerts: TestCertificates;
let etcd: EtcdServer;
let redis: RedisServer;
let postgres: PostgresServer;
let zk: ZooKeeperServer;
let scratch: ChildLog;
let passwordFile: string;
const procs: Tenure[] = [];

const run = (args: string[], env: Record<string, string> = {}): Tenure => {
  // Nothing of the test runner's own environment stands in for a flag.
  const t = tenure(args, { TENURE_BACKEND: '', TENURE_ENDPOINTS: '', TENURE_PASSWORD: '', PGPASSWORD: '', ...env });
  procs.push(t);
  return t;
};
const tls = (c: TestCertificates = certs): string[] => ['--cacert', c.caFile, '--cert', c.clientCertFile, '--key', c.clientKeyFile];
/** What the command printed of its environment (the empty variables the tests set, left out). */
const shown = (t: Tenure): Record<string, string> =>
  Object.fromEntries(Object.entries(JSON.parse(t.stdout().trim().split('\n').at(-1)!) as Record<string, string>).filter(([, v]) => v !== ''));
const expectNoSecret = (t: Tenure, ...secrets: string[]): void => {
  for (const s of [SECRET, ...secrets]) {
    expect(t.stderr()).not.toContain(s);
    expect(t.stdout()).not.toContain(s);
  }
};

beforeAll(async () => {
  scratch = new ChildLog();
  passwordFile = join(scratch.dir, 'password');
  writeFileSync(passwordFile, `${SECRET}\n`, { mode: 0o600 });
  [certs, pgCerts] = await Promise.all([makeCertificates(), makeCertificates(postgresUser())]);
  [etcd, redis, postgres, zk] = await Promise.all([
    new EtcdServer({ tls: certs }).start(),
    new RedisServer({ tls: certs, aclUsers: [`tenure on >${SECRET} resetchannels ${REDIS_ACL}`] }).start(),
    new PostgresServer({ ssl: pgCerts, hba: ['hostssl all app 127.0.0.1/32 scram-sha-256', 'host all app 127.0.0.1/32 reject'] }).start(),
    new ZooKeeperServer({ superPassword: 'super-secret' }).start(),
  ]);
  await etcd.enableAuth('root-secret', [{ name: 'app', prefix: 'app/', password: SECRET }]);
  const admin = new pg.Client(postgres.connectionConfig);
  await admin.connect();
  try {
    await admin.query(`CREATE ROLE app LOGIN PASSWORD '${SECRET}'`);
    await admin.query(SCHEMA_SQL({ schema: 'billing' }));
    await admin.query(GRANTS_SQL('app', { schema: 'billing' }));
  } finally {
    await admin.end();
  }
});
afterAll(async () => {
  await killAll(procs);
  await Promise.all([etcd?.stop(), redis?.stop(), postgres?.stop(), zk?.stop()]);
  scratch?.remove();
});

describe('tenure CLI on secured stores', () => {
  it('etcd over mutual TLS as a role limited to its prefix, the password from --password-file: the lock is granted, the command runs without TENURE_PASSWORD', async () => {
    const endpoint = `127.0.0.1:${etcd.clientPort}`; // https:// follows from the TLS flags
    const t = run(['lock', '--backend', 'etcd', '--endpoints', endpoint, ...tls(), '--user', 'app', '--password-file', passwordFile, '--name', 'app/job', '--', ...SHOW_ENV], { TENURE_PASSWORD: 'not-this-one' });
    expect((await exitOf(t)).code, t.stderr()).toBe(0);
    expect(shown(t)).toEqual({ fence: expect.stringMatching(/^\d+$/) });
    const leader = run(['leader', '--backend', 'etcd', '--endpoints', endpoint, ...tls(), '--user', 'app', '--name', 'app/job', '--json'], { TENURE_PASSWORD: SECRET });
    expect((await exitOf(leader)).code, leader.stderr()).toBe(0);
    expect(JSON.parse(leader.stdout())).toBeNull();
    expectNoSecret(t, 'not-this-one');
  });

  it('etcd: a wrong password and a name outside the role are refused at start-up (exit 69) with no password in the message', async () => {
    const endpoint = `https://127.0.0.1:${etcd.clientPort}`;
    const wrong = run(['leader', '--backend', 'etcd', '--endpoints', endpoint, ...tls(), '--user', 'app', '--name', 'app/job'], { TENURE_PASSWORD: 'wrong-Pa55' });
    const outside = run(['lock', '--backend', 'etcd', '--endpoints', endpoint, ...tls(), '--user', 'app', '--name', 'other/job', '--', 'true'], { TENURE_PASSWORD: SECRET });
    expect((await exitOf(wrong)).code, wrong.stderr()).toBe(69);
    expect(wrong.stderr()).toMatch(/permission denied|authentication failed/i);
    expect((await exitOf(outside)).code, outside.stderr()).toBe(69);
    expect(outside.stderr()).toMatch(/permission denied/i);
    expectNoSecret(wrong, 'wrong-Pa55');
    expectNoSecret(outside);
  });

  it('Redis over TLS as an ACL user, the password from TENURE_PASSWORD: the command runs without it, and gets it with --pass-env', async () => {
    // --ttl 2s: a fresh Redis grants nothing for one TTL (its restart guard).
    const args = ['--backend', 'redis', '--endpoints', `127.0.0.1:${redis.port}`, ...tls(), '--user', 'tenure', '--name', 'job', '--ttl', '2s'];
    const t = run(['run', ...args, '--', ...SHOW_ENV], { TENURE_PASSWORD: SECRET });
    expect((await exitOf(t)).code, t.stderr()).toBe(0);
    expect(shown(t)).toEqual({ fence: expect.stringMatching(/^\d+$/) });
    expectNoSecret(t);
    const passed = run(['lock', ...args, '--pass-env', 'TENURE_PASSWORD', '--', ...SHOW_ENV], { TENURE_PASSWORD: SECRET });
    expect((await exitOf(passed)).code, passed.stderr()).toBe(0);
    expect(shown(passed).TENURE_PASSWORD).toBe(SECRET);
  });

  it('Postgres over TLS (verify-full) as a plain role in its schema, the password from PGPASSWORD: the command runs without PGPASSWORD; a wrong one exits 69 unechoed', async () => {
    const endpoint = `postgres://127.0.0.1:${postgres.port}/postgres`;
    const args = ['--backend', 'postgres', '--endpoints', endpoint, '--sslmode', 'verify-full', '--cacert', pgCerts.caFile, '--user', 'app', '--schema', 'billing', '--name', 'job'];
    const t = run(['lock', ...args, '--', ...SHOW_ENV], { PGPASSWORD: SECRET });
    expect((await exitOf(t)).code, t.stderr()).toBe(0);
    expect(shown(t)).toEqual({ fence: expect.stringMatching(/^\d+$/) });
    expectNoSecret(t);
    const wrong = run(['leader', ...args], { TENURE_PASSWORD: 'wrong-Pa55' });
    expect((await exitOf(wrong)).code, wrong.stderr()).toBe(69);
    expectNoSecret(wrong, 'wrong-Pa55');
  });

  it('TENURE_ENDPOINTS holding a password is not passed to the command, and a password typed in --endpoints is warned about', async () => {
    const url = `postgres://app:${SECRET}@127.0.0.1:${postgres.port}/postgres?sslmode=verify-full&sslrootcert=${encodeURIComponent(pgCerts.caFile)}`;
    const t = run(['run', '--backend', 'postgres', '--schema', 'billing', '--name', 'job', '--', ...SHOW_ENV], { TENURE_ENDPOINTS: url });
    expect((await exitOf(t)).code, t.stderr()).toBe(0);
    expect(shown(t)).toEqual({ fence: expect.stringMatching(/^\d+$/) });
    expect(t.stderr()).not.toMatch(/warning/);
    expectNoSecret(t);
    const typed = run(['leader', '--backend', 'postgres', '--endpoints', url, '--schema', 'billing', '--name', 'job']);
    expect((await exitOf(typed)).code, typed.stderr()).toBe(0);
    expect(typed.stderr()).toMatch(/warning: the password in --endpoints shows in ps/);
    expectNoSecret(typed);
  });

  it('ZooKeeper with digest auth (a password file others may read is warned about): the nodes tenure creates are the user’s only (creator ACL by default); without the credentials `tenure leader` is refused (exit 69), with `--acl creator,world:anyone:r` it may look but not queue', async () => {
    const readable = join(scratch.dir, 'readable-password');
    writeFileSync(readable, SECRET, { mode: 0o644 });
    const t = run(['lock', '--backend', 'zk', '--endpoints', zk.connectionString, '--user', 'owner', '--password-file', readable, '--name', '/cli-secure/job', '--', ...SHOW_ENV]);
    expect((await exitOf(t)).code, t.stderr()).toBe(0);
    expect(t.stderr()).toMatch(/--password-file '.*readable-password' can be read by group or others/);
    expect(shown(t)).toEqual({ fence: expect.stringMatching(/^\d+$/) });
    const su = await zkClient(zk.connectionString);
    su.addAuthInfo('digest', Buffer.from('super:super-secret'));
    try {
      for (const path of ['/cli-secure', '/cli-secure/job']) {
        const acl = await new Promise<zookeeper.ACL[]>((resolve, reject) => su.getACL(path, (e, a) => (e ? reject(e) : resolve(a))));
        expect(acl.map((a) => `${a.id.scheme}:${a.id.id.split(':')[0]}`)).toEqual(['digest:owner']);
      }
    } finally {
      su.close();
    }
    const anonymous = run(['leader', '--backend', 'zk', '--endpoints', zk.connectionString, '--name', '/cli-secure/job']);
    expect((await exitOf(anonymous)).code, anonymous.stderr()).toBe(69);
    expect(anonymous.stderr()).toMatch(/NO_AUTH|not authenticated|permission/i);
    expectNoSecret(t);
    // creator,world:anyone:r: everyone may look, only the user may queue or delete.
    const open = run(['lock', '--backend', 'zk', '--endpoints', zk.connectionString, '--user', 'owner', '--password-file', passwordFile, '--acl', 'creator,world:anyone:r', '--name', '/cli-readable/job', '--', 'true']);
    expect((await exitOf(open)).code, open.stderr()).toBe(0);
    const looker = run(['leader', '--backend', 'zk', '--endpoints', zk.connectionString, '--name', '/cli-readable/job', '--json']);
    expect((await exitOf(looker)).code, looker.stderr()).toBe(0);
    expect(JSON.parse(looker.stdout())).toBeNull();
    const intruder = run(['lock', '--backend', 'zk', '--endpoints', zk.connectionString, '--name', '/cli-readable/job', '--', 'true']);
    expect((await exitOf(intruder)).code, intruder.stderr()).toBe(69);
  });
});
