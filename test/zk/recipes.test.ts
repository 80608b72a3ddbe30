import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ZooKeeperServer } from '../../src/testing/index.js';
import { AcquireTimeoutError, ClosedError, ConfigError } from '../../src/core/errors.js';
import { InterProcessReadWriteLock, InterProcessSemaphoreV2, type ZkSession } from '../../src/recipes/zk/index.js';
import { children, eventually, expireSession, openSession, rawClient, T } from './helpers.js';

let zk: ZooKeeperServer;
let s1: ZkSession;
let s2: ZkSession;

beforeAll(async () => {
  zk = await new ZooKeeperServer().start();
  [s1, s2] = await Promise.all([openSession(zk.connectionString), openSession(zk.connectionString)]);
});
afterAll(async () => {
  await Promise.all([s1?.close(), s2?.close()]);
  await zk?.stop();
});

describe('InterProcessSemaphoreV2', () => {
  it('hands out at most maxLeases, individually, and the next waiter gets a freed one', async () => {
    const a = new InterProcessSemaphoreV2(s1, '/sem/basic', 3);
    const b = new InterProcessSemaphoreV2(s2, '/sem/basic', 3);
    const two = await a.acquire(2);
    expect(two).toHaveLength(2);
    expect(two[0]!.fence).not.toBe(two[1]!.fence);
    const one = await b.acquire(1, { timeoutMs: T.wait });
    await expect(b.acquire(1, { timeoutMs: 300 })).rejects.toBeInstanceOf(AcquireTimeoutError);
    // The timed-out acquire left no lease node behind (CURATOR-335/462).
    expect(await a.participants()).toHaveLength(3);
    const pending = b.acquire(1);
    await two[0]!.release();
    const got = await pending;
    expect(got).toHaveLength(1);
    expect(await a.participants()).toHaveLength(3);
    await Promise.all([two[1]!.release(), one[0]!.release(), got[0]!.release()]);
    expect(await a.participants()).toHaveLength(0);
    await Promise.all([a.close(), b.close()]);
  });

  it('a holder whose session expires leaves no orphaned lease: the next acquirer gets all of them', async () => {
    const doomed = await openSession(zk.connectionString, { policy: 'session' });
    try {
      const a = new InterProcessSemaphoreV2(doomed, '/sem/expiry', 2);
      const b = new InterProcessSemaphoreV2(s2, '/sem/expiry', 2);
      const held = await a.acquire(2);
      const waiting = b.acquire(2, { timeoutMs: T.wait });
      await expireSession(zk.connectionString, doomed);
      expect(held.every((l) => l.signal.aborted)).toBe(true);
      const got = await waiting;
      expect(await b.participants()).toHaveLength(2);
      await Promise.all(got.map((l) => l.release()));
      expect(await b.participants()).toHaveLength(0);
      await Promise.all([a.close(), b.close()]);
    } finally {
      await doomed.close();
    }
  });

  it('close releases every lease it handed out', async () => {
    const a = new InterProcessSemaphoreV2(s1, '/sem/close', 2);
    const leases = await a.acquire(2);
    await a.close();
    expect(leases.every((l) => l.signal.aborted)).toBe(true);
    const raw = await rawClient(zk.connectionString);
    expect(await children(raw, '/sem/close/leases')).toEqual([]);
    raw.close();
    await expect(a.acquire()).rejects.toBeInstanceOf(ClosedError);
  });

  it('rejects maxLeases < 1 and qty out of range', async () => {
    expect(() => new InterProcessSemaphoreV2(s1, '/sem/bad', 0)).toThrow(ConfigError);
    expect(() => new InterProcessSemaphoreV2(s1, '/sem/bad', 1.5)).toThrow(/maxLeases/);
    expect(() => new InterProcessSemaphoreV2(s1, 'sem', 1)).toThrow(/path/);
    const sem = new InterProcessSemaphoreV2(s1, '/sem/bad', 2);
    await expect(sem.acquire(3)).rejects.toThrow(/qty/);
    await expect(sem.acquire(0)).rejects.toBeInstanceOf(ConfigError);
    await sem.close();
  });
});

describe('InterProcessReadWriteLock', () => {
  it('lets readers share, makes a writer wait for them, and readers wait for a writer', async () => {
    const rw1 = new InterProcessReadWriteLock(s1, '/rw/basic');
    const rw2 = new InterProcessReadWriteLock(s2, '/rw/basic');
    const r1 = await rw1.readLock().acquire();
    const r2 = await rw2.readLock().acquire({ timeoutMs: T.wait });
    await expect(rw2.writeLock().acquire({ timeoutMs: 300 })).rejects.toBeInstanceOf(AcquireTimeoutError);
    await Promise.all([r1.release(), r2.release()]);
    const w = await rw2.writeLock().acquire({ timeoutMs: T.wait });
    await expect(rw1.readLock().acquire({ timeoutMs: 300 })).rejects.toBeInstanceOf(AcquireTimeoutError);
    await w.release();
    await (await rw1.readLock().acquire({ timeoutMs: T.wait })).release();
    await Promise.all([rw1.close(), rw2.close()]);
  });

  it('downgrades write→read: the read lock is granted while writing, and no queued writer slips in', async () => {
    const rw = new InterProcessReadWriteLock(s1, '/rw/downgrade');
    const other = new InterProcessReadWriteLock(s2, '/rw/downgrade');
    const w = await rw.writeLock().acquire();
    let otherWriter = false;
    const queued = other.writeLock().acquire().then((l) => ((otherWriter = true), l));
    await eventually(async () => (await rw.writeLock().participants()).length === 2);
    const r = await rw.readLock().acquire({ timeoutMs: 2000 });
    await w.release();
    await new Promise((res) => setTimeout(res, 300));
    expect(otherWriter).toBe(false);
    await r.release();
    const ow = await queued;
    expect(ow.fence > w.fence).toBe(true);
    await ow.release();
    await Promise.all([rw.close(), other.close()]);
  });
});
