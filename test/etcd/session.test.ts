import { describe, expect, it } from 'vitest';
import { FaultProxy } from '../../src/testing/index.js';
import { EtcdSession } from '../../src/recipes/etcd/session.js';
import { AcquireTimeoutError, ClosedError, ConfigError, LeaseLostError, SessionExpiredError } from '../../src/core/errors.js';
import { settlesWithin } from '../helpers/wait.js';
import { etcdForFile, TTL, abortedAt, uniqueName, until } from './helpers.js';

const { server, pool } = etcdForFile();

async function leaseTtl(id: string): Promise<number> {
  const r = await pool.shared().leaseClient.leaseTimeToLive({ ID: id });
  return Number(r.TTL);
}

describe('EtcdSession', () => {
  it('keeps its lease alive well past the TTL and moves the local deadline forward', async () => {
    const s = await pool.session();
    const first = s.deadline;
    await new Promise((r) => setTimeout(r, TTL * 1000 * 1.6));
    expect(s.signal.aborted).toBe(false);
    expect(s.keepAlivesAcked).toBeGreaterThanOrEqual(2);
    expect(s.deadline).toBeGreaterThan(first);
    expect(await leaseTtl(s.leaseId)).toBeGreaterThan(0);
  });

  it('places the local deadline at least the safety margin before the server could expire the lease', async () => {
    const s = await pool.session({ safetyMarginMs: 400 });
    expect(s.remainingMs()).toBeLessThanOrEqual(TTL * 1000 - 400);
    expect(s.remainingMs()).toBeGreaterThan(0);
  });

  it('revokes on close: keys attached to the lease vanish and the signal says closed', async () => {
    const s = await pool.session();
    const key = uniqueName('k');
    await pool.shared().put(key).value('v').lease(s.leaseId);
    await s.close();
    expect(s.signal.reason).toBeInstanceOf(LeaseLostError);
    expect((s.signal.reason as LeaseLostError).reason).toBe('closed');
    expect(await pool.shared().get(key).string()).toBeNull();
    expect(await leaseTtl(s.leaseId)).toBeLessThanOrEqual(0);
    await s.close(); // idempotent
  });

  it('orphan stops refreshing without revoking, and another session can resume the lease', async () => {
    const s = await pool.session();
    const key = uniqueName('k');
    await pool.shared().put(key).value('v').lease(s.leaseId);
    s.orphan();
    expect(s.signal.aborted).toBe(true);
    const resumed = await pool.session({ leaseId: s.leaseId });
    expect(resumed.leaseId).toBe(s.leaseId);
    await new Promise((r) => setTimeout(r, TTL * 1000 * 1.5));
    expect(resumed.signal.aborted).toBe(false);
    expect(await pool.shared().get(key).string()).toBe('v');
  });

  it('refuses to resume a lease that does not exist', async () => {
    await expect(EtcdSession.create({ client: pool.shared(), ttlMs: TTL * 1000, leaseId: '12345' })).rejects.toBeInstanceOf(SessionExpiredError);
  });

  it('aborts with reason expired when a keepalive answers that the lease was revoked', async () => {
    const s = await pool.session();
    await pool.shared().leaseClient.leaseRevoke({ ID: s.leaseId });
    await until(() => s.signal.aborted, TTL * 1000 * 2, 'session loss');
    expect((s.signal.reason as LeaseLostError).reason).toBe('expired');
  });

  it('aborts at its local deadline when partitioned, before the server expires the lease', async () => {
    const proxy = await new FaultProxy({ target: { port: server().clientPort } }).start();
    try {
      const client = pool.client([`http://${proxy.address}`]);
      const s = await pool.session({ client, safetyMarginMs: 300 });
      const key = uniqueName('k');
      const put = await pool.shared().put(key).value('v').lease(s.leaseId).exec();
      const gone = new Promise<number>((resolve) => {
        void pool.shared().watch().key(key).startRevision(String(BigInt(put.header.revision) + 1n)).create().then((w) => w.on('delete', () => resolve(performance.now())));
      });
      const aborted = abortedAt(s.signal);
      proxy.blackhole();
      const [tAbort, tGone] = await Promise.all([aborted, gone]);
      expect((s.signal.reason as LeaseLostError).reason).toBe('deadline');
      expect(tAbort).toBeLessThan(tGone);
    } finally {
      await proxy.stop();
    }
  });

  it('create() takes { signal, timeoutMs } like every wait: on a blackholed link it rejects with exactly the signal\'s reason, or an AcquireTimeoutError, well inside callTimeoutMs', async () => {
    const proxy = await new FaultProxy({ target: { port: server().clientPort } }).start();
    try {
      const client = pool.client([`http://${proxy.address}`]);
      proxy.blackhole();
      const reason = new Error('caller gave up');
      const ac = new AbortController();
      setTimeout(() => ac.abort(reason), 200);
      const aborted = EtcdSession.create({ client, ttlMs: TTL * 1000, callTimeoutMs: 20_000 }, { signal: ac.signal });
      expect(await settlesWithin(aborted, 3000)).toBe('rejected');
      expect(await aborted.catch((e: unknown) => e)).toBe(reason);
      const timedOut = EtcdSession.create({ client, ttlMs: TTL * 1000, callTimeoutMs: 20_000 }, { timeoutMs: 200 });
      expect(await settlesWithin(timedOut, 3000)).toBe('rejected');
      expect(await timedOut.catch((e: unknown) => e)).toBeInstanceOf(AcquireTimeoutError);
    } finally {
      await proxy.stop();
    }
  });

  it('rejects bad options with ConfigError naming the field', async () => {
    const c = pool.shared();
    const bad = async (o: object, field: string) => {
      const e = await EtcdSession.create(o as never).catch((x: unknown) => x);
      expect(e).toBeInstanceOf(ConfigError);
      expect((e as ConfigError).field).toBe(field);
    };
    await bad({ client: c, ttlMs: 0 }, 'ttlMs');
    await bad({ client: c, ttlMs: -1000 }, 'ttlMs');
    await bad({ client: c, ttlMs: 1500 }, 'ttlMs');
    await bad({ client: c, ttlMs: 2 ** 31 }, 'ttlMs');
    await bad({ client: c, ttlMs: 2000, safetyMarginMs: 2000 }, 'safetyMarginMs');
    await bad({ client: c, ttlMs: 2000, safetyMarginMs: 0 }, 'safetyMarginMs');
    await bad({ client: c, clock: { now: 'x' } }, 'clock');
    await bad({ client: c, logger: {} }, 'logger');
    await bad({}, 'client');
    await bad({ client: c, hosts: ['http://x'] }, 'client');
    await bad({ client: c, leaseId: 'abc' }, 'leaseId');
  });

  it('refuses use after close with a named error', async () => {
    const s = await pool.session();
    await s.close();
    expect(() => s.throwIfLost('x')).toThrow(ClosedError);
  });
});
