import { afterAll, beforeAll, expect, it, vi } from 'vitest';
import { Writable } from 'node:stream';
import zookeeper from 'node-zookeeper-client';
import { pino } from 'pino';
import { InterProcessMutex, InterProcessReadWriteLock, LeaderLatch, ZkSession, digestAcl } from '../../src/recipes/zk/index.js';
import { PermissionDeniedError } from '../../src/index.js';
import { ZooKeeperServer } from '../../src/testing/index.js';
import { zkClient } from '../helpers/clients.js';
import { expectNoSecret } from '../helpers/secrets.js';

/**
 * ZooKeeper digest auth and ACLs: the owner's sessions authenticate as `owner` and create every
 * node with an ACL for `owner` only; other clients (none, or other credentials) get nothing.
 */
const SECRET = 'owner-Pa55-word';
let zk: ZooKeeperServer;
const sessions: ZkSession[] = [];
const lines: string[] = [];
const logger = pino({ level: 'debug' }, new Writable({ write: (c: Buffer, _e, cb) => (lines.push(c.toString()), cb()) }));

async function session(auth?: string): Promise<ZkSession> {
  const s = await ZkSession.create({
    connectionString: zk.connectionString,
    ttlMs: 4000,
    logger,
    ...(auth ? { authInfo: [{ scheme: 'digest', auth }] } : {}),
    ...(auth?.startsWith('owner:') ? { acl: [digestAcl('owner', SECRET)] } : {}),
  });
  sessions.push(s);
  return s;
}

const call = <T>(f: (cb: (e: unknown, v?: T) => void) => void): Promise<T> =>
  new Promise((resolve, reject) => f((e, v) => (e ? reject(e) : resolve(v as T))));

beforeAll(async () => {
  zk = await new ZooKeeperServer({ superPassword: 'super-secret' }).start();
});
afterAll(async () => {
  await Promise.all(sessions.map((s) => s.close()));
  await zk?.stop();
});

it('recipes create their nodes with the session ACL; other clients cannot delete the holder’s node or create in the lock path', async () => {
  const owner = await session(`owner:${SECRET}`);
  const other = await session(`owner:${SECRET}`);
  const lease = await new InterProcessMutex(owner, '/secure/locks/job').acquire({ timeoutMs: 5000 });
  const waiting = new InterProcessMutex(other, '/secure/locks/job').acquire({ timeoutMs: 5000 });

  const raw = await zkClient(zk.connectionString);
  const su = await zkClient(zk.connectionString);
  su.addAuthInfo('digest', Buffer.from('super:super-secret'));
  try {
    // Reading an ACL needs READ or ADMIN: ZooKeeper's super user looks.
    for (const path of ['/secure', '/secure/locks', '/secure/locks/job']) {
      const acl = await call<zookeeper.ACL[]>((cb) => su.getACL(path, cb as never));
      expect(acl.map((a) => `${a.id.scheme}:${a.id.id.split(':')[0]}`)).toEqual(['digest:owner']);
    }
    const anyone = (p: Promise<unknown>): Promise<void> => expect(p).rejects.toMatchObject({ code: zookeeper.Exception.NO_AUTH });
    await anyone(call((cb) => raw.getChildren('/secure/locks/job', cb as never)));
    await anyone(call((cb) => raw.create('/secure/locks/job/intruder', cb as never)));
    raw.addAuthInfo('digest', Buffer.from('owner:wrong-password'));
    await anyone(call((cb) => raw.create('/secure/locks/job/intruder', cb as never)));
    // The holder's node, found by the owner, cannot be deleted by anyone else.
    const [holder] = await new InterProcessMutex(owner, '/secure/locks/job').participants();
    await anyone(call((cb) => raw.remove(holder!.path, -1, cb as never)));
  } finally {
    raw.close();
    su.close();
  }
  expect(lease.signal.aborted).toBe(false);
  await lease.release();
  await (await waiting).release();
});

it('a session without the credentials is refused with PermissionDeniedError, at once, by the mutex and the latch', async () => {
  const owner = await session(`owner:${SECRET}`);
  await (await new InterProcessMutex(owner, '/secure/latch/x').acquire()).release(); // makes the path with the ACL
  for (const auth of [undefined, 'owner:wrong-password', 'someone:else']) {
    const s = await session(auth);
    const t0 = performance.now();
    const e1 = await new InterProcessMutex(s, '/secure/latch/x').acquire({ timeoutMs: 10_000 }).catch((e: unknown) => e);
    expect(e1).toBeInstanceOf(PermissionDeniedError);
    const latch = new LeaderLatch(s, '/secure/latch/x');
    const e2 = await latch.campaign({ timeoutMs: 10_000 }).catch((e: unknown) => e);
    expect(e2).toBeInstanceOf(PermissionDeniedError);
    for (const e of [e1, e2]) expectNoSecret(e, SECRET, 'wrong-password');
    expect(performance.now() - t0).toBeLessThan(5000);
    await latch.close();
  }
  // The session's credentials never reach a log line.
  expect(lines.join('\n')).not.toContain(SECRET);
  expect(lines.join('\n')).not.toContain('wrong-password');
});

it('an ACL given in a recipe’s options overrides the session’s (none here): mutex and latch nodes are the owner’s only', async () => {
  const s = await ZkSession.create({ connectionString: zk.connectionString, ttlMs: 4000, authInfo: [{ scheme: 'digest', auth: `owner:${SECRET}` }] });
  sessions.push(s);
  const acl = [digestAcl('owner', SECRET)];
  const lease = await new InterProcessMutex(s, '/per-recipe/lock', { acl }).acquire({ timeoutMs: 5000 });
  const latch = new LeaderLatch(s, '/per-recipe/latch', { acl });
  const term = await latch.campaign({ timeoutMs: 5000 });
  const su = await zkClient(zk.connectionString);
  su.addAuthInfo('digest', Buffer.from('super:super-secret'));
  try {
    for (const path of ['/per-recipe/lock', '/per-recipe/latch', latch.ourPath!]) {
      const got = await call<zookeeper.ACL[]>((cb) => su.getACL(path, cb as never));
      expect(got.map((a) => `${a.id.scheme}:${a.id.id.split(':')[0]}`)).toEqual(['digest:owner']);
    }
  } finally {
    su.close();
  }
  expect(() => new InterProcessMutex(s, '/per-recipe/x', { acl: [] })).toThrow(/^acl:/);
  await term.release();
  await latch.close();
  await lease.release();
});

it('the read/write lock takes the ACL in its options too (it was accepted and ignored): both sides’ nodes are the owner’s only', async () => {
  const s = await ZkSession.create({ connectionString: zk.connectionString, ttlMs: 4000, authInfo: [{ scheme: 'digest', auth: `owner:${SECRET}` }] });
  sessions.push(s);
  const rw = new InterProcessReadWriteLock(s, '/per-recipe/rw', { acl: [digestAcl('owner', SECRET)] });
  const write = await rw.writeLock().acquire({ timeoutMs: 5000 });
  const read = await rw.readLock().acquire({ timeoutMs: 5000 }); // the downgrade: granted while the write lock is held
  const su = await zkClient(zk.connectionString);
  su.addAuthInfo('digest', Buffer.from('super:super-secret'));
  try {
    for (const path of ['/per-recipe/rw', rw.writeLock().ourPath!, rw.readLock().ourPath!]) {
      const got = await call<zookeeper.ACL[]>((cb) => su.getACL(path, cb as never));
      expect(got.map((a) => `${a.id.scheme}:${a.id.id.split(':')[0]}`), path).toEqual(['digest:owner']);
    }
  } finally {
    su.close();
  }
  expect(() => new InterProcessReadWriteLock(s, '/per-recipe/x', { acl: [] })).toThrow(/^acl:/);
  await read.release();
  await write.release();
  await rw.close();
});

it('authInfo without acl protects nothing: the nodes are world:anyone, anyone may delete the holder’s, and the session warns', async () => {
  const seen: string[] = [];
  const warnLog = pino({ level: 'warn' }, new Writable({ write: (c: Buffer, _e, cb) => (seen.push(c.toString()), cb()) }));
  const s = await ZkSession.create({ connectionString: zk.connectionString, ttlMs: 4000, logger: warnLog, authInfo: [{ scheme: 'digest', auth: `owner:${SECRET}` }] });
  sessions.push(s);
  expect(seen.join('\n')).toMatch(/authInfo without acl.*world:anyone/);
  expect(seen.join('\n')).not.toContain(SECRET);
  const mutex = new InterProcessMutex(s, '/open/lock');
  const lease = await mutex.acquire({ timeoutMs: 5000 });
  const [holder] = await mutex.participants();
  const raw = await zkClient(zk.connectionString); // no credentials at all
  try {
    const acl = await call<zookeeper.ACL[]>((cb) => raw.getACL(holder!.path, cb as never));
    expect(acl.map((a) => `${a.id.scheme}:${a.id.id}`)).toEqual(['world:anyone']);
    await call((cb) => raw.remove(holder!.path, -1, cb as never));
  } finally {
    raw.close();
  }
  await vi.waitFor(() => expect(lease.signal.aborted).toBe(true), { timeout: 5000 }); // the holder learns it lost the lock
  await lease.release();
});
