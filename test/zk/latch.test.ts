import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ZooKeeperServer } from '../../src/testing/index.js';
import { ClosedError, ConfigError, LeaseLostError } from '../../src/core/errors.js';
import { whenAborted } from '../../src/core/abort.js';
import { LeaderLatch, type ZkSession } from '../../src/recipes/zk/index.js';
import { eventually, expireSession, openSession, T } from './helpers.js';

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
    latches[0]!.start();
    const term0 = await latches[0]!.await({ timeoutMs: T.wait });
    // Queue them one at a time so the queue order (and so the next leader) is known.
    latches[1]!.start();
    await eventually(async () => (await latches[0]!.getParticipants()).length === 2);
    latches[2]!.start();
    await eventually(async () => (await latches[0]!.getParticipants()).length === 3);
    expect(latches.map((l) => l.hasLeadership())).toEqual([true, false, false]);
    expect(await latches[2]!.getLeader()).toMatchObject({ id: 'p0', isLeader: true });
    expect(latches[0]!.ourPath).toMatch(/^\/latch\/basic\/_c_[0-9a-f-]{36}-latch-\d{10}$/);
    await latches[0]!.close();
    expect(term0.signal.aborted).toBe(true);
    const term1 = await latches[1]!.await({ timeoutMs: T.wait });
    expect(term1.fence > term0.fence).toBe(true);
    expect(latches[2]!.hasLeadership()).toBe(false);
    expect((await latches[2]!.getLeader())?.id).toBe('p1');
    await Promise.all(latches.map((l) => l.close()));
  });

  it('fires isLeader/notLeader on edges only, and notLeader on close only with notifyLeader', async () => {
    const latch = new LeaderLatch(sessions[0]!, '/latch/events', { closeMode: 'notifyLeader' });
    const events: string[] = [];
    latch.on('isLeader', () => events.push('isLeader'));
    latch.on('notLeader', () => events.push('notLeader'));
    latch.start();
    await latch.await({ timeoutMs: T.wait });
    await latch.close();
    expect(events).toEqual(['isLeader', 'notLeader']);
    const quiet = new LeaderLatch(sessions[0]!, '/latch/events');
    const q: string[] = [];
    quiet.on('notLeader', () => q.push('notLeader'));
    quiet.start();
    await quiet.await({ timeoutMs: T.wait });
    await quiet.close();
    expect(q).toEqual([]);
  });

  it('re-joins after session expiry with a new node and a new fence, events firing once each', async () => {
    // The session policy, so that the SUSPENDED blip the expiry injection causes is not a term end.
    const s = await openSession(zk.connectionString, { policy: 'session' });
    try {
      const latch = new LeaderLatch(s, '/latch/expiry', { id: 'solo' });
      const events: string[] = [];
      latch.on('isLeader', () => events.push('isLeader'));
      latch.on('notLeader', () => events.push('notLeader'));
      latch.start();
      const first = await latch.await({ timeoutMs: T.wait });
      const firstPath = latch.ourPath;
      await expireSession(zk.connectionString, s);
      await whenAborted(first.signal);
      expect((first.signal.reason as LeaseLostError).reason).toBe('session-lost');
      const second = await latch.await({ timeoutMs: T.wait });
      expect(second.fence > first.fence).toBe(true);
      expect(latch.ourPath).not.toBe(firstPath);
      await new Promise((r) => setTimeout(r, 300));
      expect(events).toEqual(['isLeader', 'notLeader', 'isLeader']);
      expect(await latch.getParticipants()).toHaveLength(1);
      await latch.close();
    } finally {
      await s.close();
    }
  });

  it('stops quietly when its session is closed under it', async () => {
    const s = await openSession(zk.connectionString);
    const latch = new LeaderLatch(s, '/latch/session-closed');
    const errors: unknown[] = [];
    latch.on('error', (e) => errors.push(e));
    latch.start();
    const term = await latch.await({ timeoutMs: T.wait });
    await s.close();
    expect(term.signal.aborted).toBe(true);
    await new Promise((r) => setTimeout(r, 500));
    expect(errors.length).toBeLessThanOrEqual(1);
    expect(latch.hasLeadership()).toBe(false);
    await latch.close();
  });

  it('rejects bad input, a second start, and use after close', async () => {
    expect(() => new LeaderLatch(sessions[0]!, 'latch')).toThrow(ConfigError);
    expect(() => new LeaderLatch(sessions[0]!, '/latch', { closeMode: 'loud' as never })).toThrow(ConfigError);
    const latch = new LeaderLatch(sessions[0]!, '/latch/guard');
    latch.start();
    expect(() => latch.start()).toThrow(ConfigError);
    await latch.close();
    expect(() => latch.start()).toThrow(ClosedError);
    await expect(latch.await()).rejects.toBeInstanceOf(ClosedError);
  });
});
