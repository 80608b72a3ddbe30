import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FaultProxy, ZooKeeperEnsemble, ZooKeeperServer } from '../../src/testing/index.js';

import type { Lease } from '../../src/core/lease.js';
import { InterProcessMutex, LeaderLatch, type ZkSession } from '../../src/recipes/zk/index.js';
import { children, eventually, keepCampaigning, openSession, rawClient, T } from './helpers.js';

describe('protected creation', () => {
  let zk: ZooKeeperServer;
  beforeAll(async () => {
    zk = await new ZooKeeperServer().start();
  });
  afterAll(async () => {
    await zk?.stop();
  });

  it('finds its own node after the link is cut right after the create, leaves no orphan, and nobody waits forever', async () => {
    const proxy = await new FaultProxy({ target: { port: zk.port } }).start();
    const observer = await rawClient(zk.connectionString);
    const s = await openSession(proxy.address);
    const other = await openSession(zk.connectionString);
    try {
      const m = new InterProcessMutex(s, '/protected/lock');
      const bystander = new InterProcessMutex(other, '/protected/lock');
      await (await bystander.acquire()).release(); // creates the parent
      // Requests and replies now take 300 ms each way: the node exists at the server well before
      // its create reply reaches the client, and the cut throws that reply away.
      proxy.delay(300);
      const acquiring = m.acquire({ timeoutMs: T.wait });
      const created = await eventually(async () => (await children(observer, '/protected/lock'))[0], 5000, 'the lock node');
      proxy.cut();
      proxy.heal();
      const lease = await acquiring;
      expect(m.ourPath).toBe(`/protected/lock/${created}`);
      expect(await children(observer, '/protected/lock')).toEqual([created]);
      await lease.release();
      expect(await children(observer, '/protected/lock')).toEqual([]);
      const next = await bystander.acquire({ timeoutMs: T.wait });
      await next.release();
      await Promise.all([m.close(), bystander.close()]);
    } finally {
      observer.close();
      await Promise.all([s.close(), other.close()]);
      await proxy.stop();
    }
  });
});

describe('watch removal', () => {
  let zk: ZooKeeperServer;
  beforeAll(async () => {
    zk = await new ZooKeeperServer().start();
  });
  afterAll(async () => {
    await zk?.stop();
  });

  it("an aborted waiter's watch is dropped at once on the client and is gone from the server after the next reconnect", async () => {
    const proxy = await new FaultProxy({ target: { port: zk.port } }).start();
    const holder = await openSession(zk.connectionString);
    const waiter = await openSession(proxy.address, { policy: 'session' });
    try {
      const a = new InterProcessMutex(holder, '/watches/lock');
      const b = new InterProcessMutex(waiter, '/watches/lock');
      const lease = await a.acquire();
      const ac = new AbortController();
      const pending = b.acquire({ signal: ac.signal });
      const watched = async (): Promise<number> => {
        const text = await zk.fourLetterWord('wchc');
        const block = text.split(/\n(?=0x)/).find((b) => b.startsWith(`0x${waiter.sessionId!.replace(/^0+/, '')}`)) ?? '';
        return block.split('\n').filter((l) => l.includes('/watches/lock/')).length;
      };
      // Its predecessor and its own node (the own-node watch is set when it queues).
      await eventually(async () => (await watched()) === 2, T.wait, "the waiter's predecessor and own-node watches");
      ac.abort(new Error('gave up'));
      await expect(pending).rejects.toThrow('gave up');
      const wm = (waiter.client as unknown as { connectionManager: { watcherManager: { isEmpty(): boolean } } }).connectionManager.watcherManager;
      expect(wm.isEmpty()).toBe(true);
      proxy.cut();
      await eventually(() => waiter.state === 'RECONNECTED');
      await eventually(async () => (await watched()) === 0, T.wait, 'no server-side watch of the waiter');
      await lease.release();
      await Promise.all([a.close(), b.close()]);
    } finally {
      await Promise.all([holder.close(), waiter.close()]);
      await proxy.stop();
    }
  });
});

describe('ensemble leader failure', () => {
  let ens: ZooKeeperEnsemble;
  beforeAll(async () => {
    ens = await new ZooKeeperEnsemble().start();
    await ens.waitForLeader();
  });
  afterAll(async () => {
    await ens?.stop();
  });

  it('recipes continue on the quorum, never two holders or leaders, and every holder on a suspended link is demoted', async () => {
    const leaderMember = (await ens.leader())!;
    const sessions: ZkSession[] = [];
    const onLeader = async (): Promise<ZkSession[]> => {
      const cons = await leaderMember.fourLetterWord('cons');
      return sessions.filter((s) => cons.includes(`sid=0x${s.sessionId!.replace(/^0+/, '')}`));
    };
    while (sessions.length < 16 && (sessions.length < 6 || (await onLeader()).length < 2)) {
      sessions.push(await openSession(ens.connectionString, { ttlMs: 4000 }));
    }
    const linkedToLeader = await onLeader();
    expect(linkedToLeader.length).toBeGreaterThanOrEqual(1);

    let holders = 0;
    let maxHolders = 0;
    let grants = 0;
    const undemoted: string[] = [];
    const held = new Map<ZkSession, Lease>();
    const latches: LeaderLatch[] = [];
    const latchSession = new Map<LeaderLatch, ZkSession>();
    for (const s of sessions) {
      s.on('state', (st) => {
        const l = held.get(s);
        if (st === 'SUSPENDED' && l && !l.signal.aborted) undemoted.push(s.sessionId!);
        if (st === 'SUSPENDED') {
          for (const latch of latches) if (latchSession.get(latch) === s && latch.term) undemoted.push(`latch on ${s.sessionId!}`);
        }
      });
    }
    const stop = new AbortController();
    const loops = sessions.map(async (s) => {
      const m = new InterProcessMutex(s, '/ensemble/mutex');
      while (!stop.signal.aborted) {
        const lease = await m.acquire({ signal: stop.signal }).catch(() => undefined);
        if (!lease) continue;
        grants++;
        held.set(s, lease);
        maxHolders = Math.max(maxHolders, ++holders);
        await new Promise<void>((r) => {
          const t = setTimeout(r, 10);
          lease.signal.addEventListener('abort', () => (clearTimeout(t), r()), { once: true });
        });
        holders--;
        held.delete(s);
        await lease.release().catch(() => undefined);
      }
      await m.close();
    });
    // The first latch (the leader-to-be) sits on a session linked to the ZooKeeper leader member,
    // so the kill suspends a latch leader for certain.
    const latchSessions = [linkedToLeader[0]!, ...sessions.filter((s) => s !== linkedToLeader[0]).slice(0, 2)];
    latchSessions.forEach((s, i) => {
      const l = new LeaderLatch(s, '/ensemble/latch', { id: `l${i}` });
      latches.push(l);
      latchSession.set(l, s);
    });
    let maxLeaders = 0;
    let demotedLatch = 0;
    for (const l of latches) {
      l.on('granted', () => (maxLeaders = Math.max(maxLeaders, latches.filter((x) => x.hasLeadership()).length)));
      l.on('lost', (reason) => reason.reason === 'suspended' && demotedLatch++);
    }
    await latches[0]!.campaign({ timeoutMs: T.wait });
    const campaigning = latches.map((l) => keepCampaigning(l, stop.signal));
    await eventually(() => grants >= 20);
    const suspended: ZkSession[] = [];
    for (const s of sessions) s.on('state', (st) => st === 'SUSPENDED' && suspended.push(s));
    await leaderMember.kill();
    await ens.waitForLeader();
    const after = grants;
    await eventually(() => grants >= after + 20, 30_000, '20 more grants after the leader member died');
    await eventually(() => latches.some((l) => l.hasLeadership()), 30_000, 'a latch leader');
    stop.abort();
    await Promise.all(loops);
    await Promise.all(campaigning);
    await Promise.all(latches.map((l) => l.close()));
    await Promise.all(sessions.map((s) => s.close()));
    expect(suspended.length).toBeGreaterThanOrEqual(1);
    expect(undemoted).toEqual([]);
    expect(demotedLatch).toBeGreaterThanOrEqual(1);
    expect(maxHolders).toBe(1);
    expect(maxLeaders).toBe(1);
  });
});

