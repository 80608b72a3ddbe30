import { afterAll, beforeAll, expect, it } from 'vitest';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { EtcdElection, EtcdMutex, EtcdSession, createEtcdClient } from '../../src/recipes/etcd/index.js';
import { PermissionDeniedError } from '../../src/index.js';
import { EtcdServer, makeCertificates } from '../../src/testing/index.js';
import { expectNoSecret } from '../helpers/secrets.js';

/**
 * etcd over mutual TLS with auth on: `app` may read and write only `app/`, which is enough for
 * every etcd recipe (plus lease grant/keepalive, which need no key permission); `other` holds
 * the same rights on `other/`.
 */
const SECRET = 'app-Pa55-word';
let etcd: EtcdServer;
const sessions: EtcdSession[] = [];

const session = async (username: string, password: string, logger?: pino.Logger): Promise<EtcdSession> => {
  const client = await createEtcdClient({ hosts: etcd.endpoints, etcd3: { credentials: etcd.credentials, auth: { username, password } } });
  try {
    const s = await EtcdSession.create({ client, ttlMs: 2000, ...(logger ? { logger } : {}) });
    sessions.push(s);
    s.signal.addEventListener('abort', () => client.close(), { once: true });
    return s;
  } catch (e) {
    client.close();
    throw e;
  }
};

beforeAll(async () => {
  etcd = await new EtcdServer({ tls: await makeCertificates() }).start();
  await etcd.enableAuth('root-secret', [
    { name: 'app', prefix: 'app/', password: SECRET },
    { name: 'other', prefix: 'other/', password: 'other-secret' },
    { name: 'narrow', prefix: 'app/narrow/', password: 'narrow-secret' },
  ]);
});
afterAll(async () => {
  await Promise.all(sessions.map((s) => s.close()));
  await etcd?.stop();
});

it('EtcdMutex and EtcdElection work over TLS as a role limited to their prefix', async () => {
  const a = await session('app', SECRET);
  const b = await session('app', SECRET);
  const m1 = new EtcdMutex(a, 'app/lock');
  const m2 = new EtcdMutex(b, 'app/lock');
  const l1 = await m1.acquire({ timeoutMs: 5000 });
  const pending = m2.acquire({ timeoutMs: 5000 });
  await l1.release();
  const l2 = await pending;
  expect(l2.fence).toBeGreaterThan(l1.fence);
  await l2.release();
  const e = new EtcdElection(a, 'app/leader');
  const term = await e.campaign({ timeoutMs: 5000 });
  expect((await e.leader())?.key).toBe(term.key);
  await term.resign();
});

it('a role for another prefix cannot read, delete or overwrite the lock: PermissionDeniedError at once, no retry loop', async () => {
  const owner = await session('app', SECRET);
  const lease = await new EtcdMutex(owner, 'app/guarded').acquire({ timeoutMs: 5000 });
  const intruder = await session('other', 'other-secret');
  const key = `app/guarded/${owner.leaseIdHex}`;
  await expect(intruder.client.get(key).string()).rejects.toThrow(/permission denied/i);
  await expect(intruder.client.delete().key(key).exec()).rejects.toThrow(/permission denied/i);
  await expect(intruder.client.put(key).value('mine').exec()).rejects.toThrow(/permission denied/i);
  const t0 = performance.now();
  await expect(new EtcdMutex(intruder, 'app/guarded').acquire({ timeoutMs: 10_000 })).rejects.toBeInstanceOf(PermissionDeniedError);
  await expect(new EtcdMutex(intruder, 'app/guarded').tryAcquire()).rejects.toBeInstanceOf(PermissionDeniedError);
  await expect(new EtcdElection(intruder, 'app/guarded').campaign({ timeoutMs: 10_000 })).rejects.toBeInstanceOf(PermissionDeniedError);
  await expect(new EtcdElection(intruder, 'app/guarded').leader()).rejects.toBeInstanceOf(PermissionDeniedError);
  await expect(new EtcdElection(intruder, 'app/guarded').observe().next()).rejects.toBeInstanceOf(PermissionDeniedError);
  expect(performance.now() - t0).toBeLessThan(5000); // refused, not retried until the timeout
  expect(lease.signal.aborted).toBe(false);
  expect(await owner.client.get(key).string()).not.toBeNull();
  await lease.release();
});

it("a role granted exactly '<name>/' (not the tail hint '<name>#tail') still queues, hands off in order and cleans up, beside participants that keep the hint; the fallback is said once", async () => {
  const lines: string[] = [];
  const logger = pino({ level: 'warn' }, new Writable({ write: (c: Buffer, _e, cb) => (lines.push(c.toString()), cb()) }));
  const narrow = [await session('narrow', 'narrow-secret', logger), await session('narrow', 'narrow-secret', logger)];
  const wide = await session('app', SECRET);
  const m = narrow.map((s) => new EtcdMutex(s, 'app/narrow'));
  const first = await m[0]!.acquire({ timeoutMs: 5000 });
  // Queued behind it: a narrow participant, then one whose role covers the hint (it reads a hint
  // that no narrow join moved, and still queues last: the claim's compare decides the order).
  const granted: string[] = [];
  const second = m[1]!.acquire({ timeoutMs: 10_000 }).then((l) => (granted.push('narrow'), l));
  await expect.poll(async () => (await wide.client.getAll().prefix('app/narrow/').keys()).length).toBe(2);
  const third = new EtcdMutex(wide, 'app/narrow').acquire({ timeoutMs: 10_000 }).then((l) => (granted.push('wide'), l));
  await expect.poll(async () => (await wide.client.getAll().prefix('app/narrow/').keys()).length).toBe(3);
  await first.release();
  const l2 = await second;
  expect(l2.fence).toBeGreaterThan(first.fence);
  await l2.release();
  const l3 = await third;
  expect(l3.fence).toBeGreaterThan(l2.fence);
  expect(granted).toEqual(['narrow', 'wide']);
  await l3.release();
  // Every key and the hint are gone (each delete was owner-checked, with or without the hint).
  expect(await wide.client.getAll().prefix('app/narrow').keys()).toEqual([]);
  // A second cycle on the same mutex does not ask again; an election on the narrow role works too.
  await (await m[0]!.acquire({ timeoutMs: 5000 })).release();
  const term = await new EtcdElection(narrow[0]!, 'app/narrow').campaign({ timeoutMs: 5000 });
  await term.resign();
  const said = lines.filter((l) => l.includes('app/narrow#tail'));
  expect(said).toHaveLength(3); // once per recipe instance: two mutexes on the narrow role, one election
  expect(said[0]).toMatch(/grant the prefix the names live under/);
});

it('a wrong password is a PermissionDeniedError, and neither errors nor logs carry a password', async () => {
  const lines: string[] = [];
  const logger = pino({ level: 'debug' }, new Writable({ write: (c: Buffer, _e, cb) => (lines.push(c.toString()), cb()) }));
  const wrong = 'not-the-Pa55-word';
  const err = await session('app', wrong, logger).catch((e: unknown) => e);
  expect(err).toBeInstanceOf(PermissionDeniedError);
  const ok = await session('app', SECRET, logger);
  await (await new EtcdMutex(ok, 'app/logged').acquire()).release();
  await ok.close();
  expectNoSecret(err, wrong, SECRET); // the whole cause chain, inspected and serialized
  expect(lines.join('\n')).not.toContain(wrong);
  expect(lines.join('\n')).not.toContain(SECRET);
});

it("etcd 3.4's lease API is not prefix-scoped: another prefix's role lists the holder's lease, sees its keys and keeps it alive; only revoke is refused", async () => {
  const owner = await session('app', SECRET);
  const lease = await new EtcdMutex(owner, 'app/leases').acquire({ timeoutMs: 5000 });
  const id = owner.leaseIdHex;
  const other = 'other:other-secret';
  expect(await etcd.etcdctl(['lease', 'list'], other)).toContain(id);
  const ttl = await etcd.etcdctl(['lease', 'timetolive', id, '--keys'], other);
  expect(ttl).toContain(`app/leases/${id}`); // the holder's key name, through the lease
  // A crashed holder's lease could be kept alive this way, blocking the lock until it stops.
  expect(await etcd.etcdctl(['lease', 'keep-alive', '--once', id], other)).toMatch(/keepalived with TTL/);
  await expect(etcd.etcdctl(['lease', 'revoke', id], other)).rejects.toThrow(/permission denied/i);
  expect(lease.signal.aborted).toBe(false);
  await lease.release();
});
