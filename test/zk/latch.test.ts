import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ZooKeeperServer } from '../../src/testing/index.js';
import { BusyError, ClosedError, ConfigError, LeaseLostError } from '../../src/core/errors.js';
import { whenAborted } from '../../src/core/abort.js';
import { LeaderLatch, type ZkSession } from '../../src/recipes/zk/index.js';
import { runInNewContext } from 'node:vm';
import { setFlagsFromString } from 'node:v8';
import zookeeper from 'node-zookeeper-client';
import { eventually, expireSession, openSession, rawClient, T } from './helpers.js';

let zk: ZooKeeperServer;
let sessions: ZkSession[];

beforeAll(async () => {
  zk = await new ZooKeeperServer().start();
  sessions = await Promise.all([0, 1, 2].map(() => openSession(zk.connectionString)));
});
afterAll(async () => {
  await Promise.all(sessions.map((s) => s.close()));
  await zk?.stop();
});

describe('LeaderLatch', () => {
  it('elects exactly one leader, reports participants, and hands over on close', async () => {
    const latches = sessions.map((s, i) => new LeaderLatch(s, '/latch/basic', { id: `p${i}` }));
    const term0 = await latches[0]!.campaign({ timeoutMs: T.wait });
    // Queue them one at a time so the queue order (and so the next leader) is known.
    const p1 = latches[1]!.campaign();
    await eventually(async () => (await latches[0]!.participants()).length === 2);
    const p2 = latches[2]!.campaign();
    p2.catch(() => undefined);
    await eventually(async () => (await latches[0]!.participants()).length === 3);
    expect(latches.map((l) => l.hasLeadership())).toEqual([true, false, false]);
    expect(await latches[2]!.leader()).toEqual({ id: 'p0', fence: term0.fence });
    expect((await latches[2]!.participants())[0]).toMatchObject({ id: 'p0', isLeader: true, fence: term0.fence });
    expect(latches[0]!.ourPath).toMatch(/^\/latch\/basic\/_c_[0-9a-f-]{36}-latch-\d{10}$/);
    await latches[0]!.close();
    expect(term0.signal.aborted).toBe(true);
    const term1 = await p1;
    expect(term1.fence > term0.fence).toBe(true);
    expect(latches[2]!.hasLeadership()).toBe(false);
    expect((await latches[2]!.leader())?.id).toBe('p1');
    await Promise.all(latches.map((l) => l.close()));
  });

  it('fires granted then released on edges only, and released on close only with notifyLeader', async () => {
    const latch = new LeaderLatch(sessions[0]!, '/latch/events', { closeMode: 'notifyLeader' });
    const events: string[] = [];
    latch.on('granted', () => events.push('granted'));
    latch.on('released', () => events.push('released'));
    latch.on('lost', () => events.push('lost'));
    await latch.campaign({ timeoutMs: T.wait });
    await latch.close();
    expect(events).toEqual(['granted', 'released']);
    const quiet = new LeaderLatch(sessions[0]!, '/latch/events');
    const q: string[] = [];
    quiet.on('released', () => q.push('released'));
    await quiet.campaign({ timeoutMs: T.wait });
    await quiet.close();
    expect(q).toEqual([]);
  });

  it('campaigns again after session expiry, with a new node and a new fence, events firing once each', async () => {
    // The session policy, so that the SUSPENDED blip the expiry injection causes is not a term end.
    // A TTL far above the expiry's few ms, so that the local deadline (which ends the term as
    // 'deadline') cannot pass first while a loaded machine is slow to hear the server's expiry.
    const s = await openSession(zk.connectionString, { policy: 'session', ttlMs: 10_000 });
    try {
      const latch = new LeaderLatch(s, '/latch/expiry', { id: 'solo' });
      const events: string[] = [];
      latch.on('granted', () => events.push('granted'));
      latch.on('released', () => events.push('released'));
      latch.on('lost', (e) => events.push(`lost:${e.reason}`));
      const first = await latch.campaign({ timeoutMs: T.wait });
      const firstPath = latch.ourPath;
      await expireSession(zk.connectionString, s);
      await whenAborted(first.signal);
      expect(first.lostReason).toBe('session-lost');
      expect((first.signal.reason as LeaseLostError).reason).toBe('session-lost');
      const second = await latch.campaign({ timeoutMs: T.wait });
      expect(second.fence > first.fence).toBe(true);
      expect(latch.ourPath).not.toBe(firstPath);
      await new Promise((r) => setTimeout(r, 300));
      expect(events).toEqual(['granted', 'lost:session-lost', 'granted']);
      expect(await latch.participants()).toHaveLength(1);
      await latch.close();
    } finally {
      await s.close();
    }
  });

  it('ends its term when its session is closed under it, and refuses to campaign on a closed session', async () => {
    const s = await openSession(zk.connectionString);
    const latch = new LeaderLatch(s, '/latch/session-closed');
    const term = await latch.campaign({ timeoutMs: T.wait });
    await s.close();
    expect(term.signal.aborted).toBe(true);
    expect(latch.hasLeadership()).toBe(false);
    await expect(latch.campaign()).rejects.toBeInstanceOf(ClosedError);
    await latch.close();
  });

  it('rejects bad input, a concurrent campaign, and use after close', async () => {
    expect(() => new LeaderLatch(sessions[0]!, 'latch')).toThrow(ConfigError);
    expect(() => new LeaderLatch(sessions[0]!, '/latch', { closeMode: 'loud' as never })).toThrow(ConfigError);
    expect(() => new LeaderLatch(sessions[0]!, '/latch', { id: 7 as never })).toThrow(ConfigError);
    const holder = new LeaderLatch(sessions[1]!, '/latch/guard');
    await holder.campaign({ timeoutMs: T.wait });
    const latch = new LeaderLatch(sessions[0]!, '/latch/guard');
    const pending = latch.campaign();
    await expect(latch.campaign()).rejects.toBeInstanceOf(BusyError);
    await latch.close();
    await expect(pending).rejects.toBeInstanceOf(ClosedError);
    await expect(latch.campaign()).rejects.toBeInstanceOf(ClosedError);
    expect(await holder.participants()).toHaveLength(1); // the closed campaign left no node
    await holder.close();
  });

  it("a waiter does not keep the queue's listing while it waits: heap per waiter stays small behind 4,000 nodes", async () => {
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    const heap = (): number => {
      gc();
      return process.memoryUsage().heapUsed;
    };
    const base = '/latch/long';
    const raw = await rawClient(zk.connectionString);
    const session = await openSession(zk.connectionString);
    const waiters = Array.from({ length: 30 }, (_, i) => new LeaderLatch(session, base, { id: `w${i}` }));
    try {
      // 4,000 nodes ahead in the queue (persistent `latch-<seq>`: the latch's own node name).
      await new Promise<void>((resolve, reject) => raw.mkdirp(base, (e) => (e ? reject(e) : resolve())));
      for (let i = 0; i < 4000; i += 500) {
        await Promise.all(Array.from({ length: 500 }, () => new Promise<void>((resolve, reject) => raw.create(`${base}/latch-`, zookeeper.CreateMode.PERSISTENT_SEQUENTIAL, (e) => (e ? reject(e) : resolve())))));
      }
      const watches = async (): Promise<number> => Number(/Total watches:(\d+)/.exec(await zk.fourLetterWord('wchs', 5000))?.[1]);
      const watches0 = await watches();
      const before = heap();
      const campaigns = waiters.map((l) => l.campaign());
      for (const c of campaigns) c.catch(() => undefined);
      // Every waiter queued: its node is in, its listing read, its predecessor watched.
      await eventually(async () => waiters.every((l) => l.ourPath !== undefined) && (await watches()) - watches0 >= 30, T.wait * 2, 'every waiter queued');
      const perWaiter = (heap() - before) / waiters.length;
      // Each listing is ~4,000 names (~200 KiB as strings): a waiter that kept it would be far above this.
      expect(perWaiter).toBeLessThan(50 * 1024);
    } finally {
      await Promise.all(waiters.map((l) => l.close()));
      await session.close();
      raw.close();
    }
  });
});

