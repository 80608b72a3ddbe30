import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FaultProxy, ZooKeeperServer } from '../../src/testing/index.js';
import { AcquireTimeoutError, ClosedError, ConfigError, LeaseLostError } from '../../src/core/errors.js';
import { settlesWithin } from '../helpers/wait.js';
import { whenAborted } from '../../src/core/abort.js';
import { InterProcessMutex, ZkSession, type ZkConnectionState } from '../../src/recipes/zk/index.js';
import { eventually, expireSession, openSession, T } from './helpers.js';

let zk: ZooKeeperServer;

beforeAll(async () => {
  zk = await new ZooKeeperServer().start();
});
afterAll(async () => {
  await zk?.stop();
});

function record(s: ZkSession): ZkConnectionState[] {
  const states: ZkConnectionState[] = [];
  s.on('state', (st) => states.push(st));
  return states;
}

describe('ZkSession', () => {
  it('connects, negotiates the timeout and exposes a live epoch signal', async () => {
    await using s = await openSession(zk.connectionString);
    expect(s.state).toBe('CONNECTED');
    expect(s.connected).toBe(true);
    expect(s.ttlMs).toBe(T.session);
    expect(s.signal.aborted).toBe(false);
    expect(s.sessionId).toMatch(/^[0-9a-f]{16}$/);
    expect(s.deadline()).toBeGreaterThan(performance.now());
  });

  it('standard policy: a cut link is SUSPENDED, aborts holders at once, then RECONNECTED on the same session', async () => {
    const proxy = await new FaultProxy({ target: { port: zk.port } }).start();
    await using s = await openSession(proxy.address);
    const states = record(s);
    const id = s.sessionId;
    const m = new InterProcessMutex(s, '/session/standard');
    const lease = await m.acquire();
    proxy.cut();
    await whenAborted(lease.signal);
    expect((lease.signal.reason as LeaseLostError).reason).toBe('suspended');
    await eventually(() => s.state === 'RECONNECTED');
    expect(states.slice(0, 2)).toEqual(['SUSPENDED', 'RECONNECTED']);
    expect(s.sessionId).toBe(id);
    // The demoted holder's node is deleted once reconnected: the lock is free again.
    await eventually(async () => (await m.participants()).length === 0);
    const again = await m.acquire({ timeoutMs: T.wait });
    expect(again.fence > lease.fence).toBe(true);
    await m.close();
    await proxy.stop();
  });

  it('session policy: a holder keeps its lease through a short SUSPENDED', async () => {
    const proxy = await new FaultProxy({ target: { port: zk.port } }).start();
    await using s = await openSession(proxy.address, { policy: 'session' });
    const states = record(s);
    const m = new InterProcessMutex(s, '/session/session-policy');
    const lease = await m.acquire();
    proxy.cut();
    await eventually(() => states.includes('RECONNECTED'));
    expect(states).toEqual(['SUSPENDED', 'RECONNECTED']);
    expect(lease.signal.aborted).toBe(false);
    expect(lease.remainingMs()).toBeGreaterThan(0);
    await lease.release();
    await m.close();
    await proxy.stop();
  });

  it('session policy: a silent server ends the lease at the local deadline, before the server could expire the session', async () => {
    const proxy = await new FaultProxy({ target: { port: zk.port } }).start();
    await using s = await openSession(proxy.address, { policy: 'session', safetyMarginMs: 500 });
    const m = new InterProcessMutex(s, '/session/deadline');
    const lease = await m.acquire();
    proxy.blackhole();
    const silentFrom = s.lastServerContact;
    await whenAborted(lease.signal);
    const abortedAt = performance.now();
    expect(['deadline', 'session-lost']).toContain((lease.signal.reason as LeaseLostError).reason);
    // Aborted before lastServerContact + sessionTimeout, the earliest the server may expire us.
    expect(abortedAt).toBeLessThan(silentFrom + s.ttlMs);
    proxy.heal();
    await eventually(() => s.state === 'CONNECTED' && s.connected, T.wait, 'a new session');
    await m.close();
    await proxy.stop();
  });

  it('many callers waiting out a reconnect: no listener-leak warning, and close rejects every one with ClosedError', async () => {
    const proxy = await new FaultProxy({ target: { port: zk.port } }).start();
    const warnings: Error[] = [];
    const onWarning = (w: Error): void => void warnings.push(w);
    process.on('warning', onWarning);
    try {
      await using s = await openSession(proxy.address); // (closed below; disposed here if the test fails first)
      proxy.blackhole();
      await eventually(() => !s.connected, T.wait, 'the silent link dropped');
      const waits = Array.from({ length: 25 }, () => s.whenConnected({ timeoutMs: 60_000 }).catch((e: unknown) => e));
      await new Promise((resolve) => setImmediate(resolve));
      await s.close();
      const outcomes = await Promise.all(waits);
      expect(outcomes.every((e) => e instanceof ClosedError)).toBe(true);
      await new Promise((resolve) => setImmediate(resolve)); // Node emits its warnings on a later tick
      expect(warnings.filter((w) => w.name === 'MaxListenersExceededWarning')).toEqual([]);
    } finally {
      process.off('warning', onWarning);
      await proxy.stop();
    }
  });

  it('after LOST it makes a new session by itself and fires each edge once', async () => {
    await using s = await openSession(zk.connectionString);
    const states = record(s);
    let lostEvents = 0;
    s.on('LOST', () => lostEvents++);
    const old = s.sessionId;
    await expireSession(zk.connectionString, s);
    await eventually(() => states.includes('CONNECTED'), T.wait, 'a new session');
    expect(states.filter((x) => x === 'LOST')).toHaveLength(1);
    expect(lostEvents).toBe(1);
    expect(states.at(-1)).toBe('CONNECTED');
    expect(s.sessionId).not.toBe(old);
  });

  it('create() takes { signal, timeoutMs } like every wait: against a silent server it rejects with exactly the signal\'s reason, or an AcquireTimeoutError, well inside connectTimeoutMs', async () => {
    const proxy = await new FaultProxy({ target: { port: zk.port } }).start();
    try {
      proxy.blackhole();
      const options = { connectionString: proxy.address, ttlMs: 2000, connectTimeoutMs: 20_000 };
      const reason = new Error('caller gave up');
      const ac = new AbortController();
      setTimeout(() => ac.abort(reason), 200);
      const aborted = ZkSession.create(options, { signal: ac.signal });
      expect(await settlesWithin(aborted, 3000)).toBe('rejected');
      expect(await aborted.catch((e: unknown) => e)).toBe(reason);
      const timedOut = ZkSession.create(options, { timeoutMs: 200 });
      expect(await settlesWithin(timedOut, 3000)).toBe('rejected');
      expect(await timedOut.catch((e: unknown) => e)).toBeInstanceOf(AcquireTimeoutError);
    } finally {
      await proxy.stop();
    }
  });

  it('rejects bad options and use after close with named errors', async () => {
    const cs = zk.connectionString;
    await expect(ZkSession.create({ connectionString: '' })).rejects.toThrow(ConfigError);
    await expect(ZkSession.create({ connectionString: '127.0.0.1:99999' })).rejects.toMatchObject({ field: 'connectionString' });
    await expect(ZkSession.create({ connectionString: cs, ttlMs: 0 })).rejects.toMatchObject({ field: 'ttlMs' });
    await expect(ZkSession.create({ connectionString: cs, ttlMs: 2 ** 31 })).rejects.toMatchObject({ field: 'ttlMs' });
    await expect(ZkSession.create({ connectionString: cs, policy: 'lenient' as never })).rejects.toMatchObject({ field: 'policy' });
    await expect(ZkSession.create({ connectionString: cs, ttlMs: 1000, safetyMarginMs: 1000 })).rejects.toMatchObject({ field: 'safetyMarginMs' });
    const s = await openSession(zk.connectionString);
    const epoch = s.signal;
    await s.close();
    expect(epoch.aborted).toBe(true);
    await s.close();
    await expect(new InterProcessMutex(s, '/x').acquire()).rejects.toBeInstanceOf(ClosedError);
  });
});
