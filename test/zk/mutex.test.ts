import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ZooKeeperServer } from '../../src/testing/index.js';
import { AcquireTimeoutError, BusyError, ClosedError, ConfigError, LeaseLostError } from '../../src/core/errors.js';
import { InterProcessMutex, type ZkSession } from '../../src/recipes/zk/index.js';
import type { Lease } from '../../src/core/lease.js';
import { children, eventually, openSession, parseWchp, rawClient, T } from './helpers.js';

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

describe('InterProcessMutex', () => {
  it("the fence is the holder node's czxid, also while other sessions create nodes at the same moment", async () => {
    // The fence comes from the create reply's header zxid: prove it is the node's own czxid
    // when creates from two sessions interleave on the server.
    const locks = Array.from({ length: 20 }, (_, i) => new InterProcessMutex(i % 2 ? s1 : s2, `/mutex/czxid/${i}`));
    const leases = await Promise.all(locks.map((m) => m.acquire()));
    const raw = await rawClient(zk.connectionString);
    try {
      for (const [i, m] of locks.entries()) {
        const stat = await new Promise<{ czxid: Buffer }>((resolve, reject) => raw.exists(m.ourPath!, (e, st) => (e || !st ? reject(e ?? new Error('gone')) : resolve(st as never))));
        expect(leases[i]!.fence).toBe(stat.czxid.readBigInt64BE(0));
      }
    } finally {
      raw.close();
      await Promise.all(leases.map((l) => l.release()));
      await Promise.all(locks.map((m) => m.close()));
    }
  });

  /** Records the requests `session`'s client sends and the replies it reads, while `fn` runs (but the session's liveness ping, an `exists` on `/`). */
  async function requestTimeline(session: ZkSession, fn: (timeline: readonly string[]) => Promise<void>): Promise<string[]> {
    type Queue = (request: { header: { type: number }; payload?: { watch?: boolean; path?: string } }, cb: (...a: unknown[]) => void) => void;
    const manager = (session.client as unknown as { connectionManager: { queue: Queue } }).connectionManager;
    const own = Object.getOwnPropertyDescriptor(manager, 'queue');
    const queue = manager.queue.bind(manager);
    const ops: Record<number, string> = { 1: 'create', 2: 'delete', 3: 'exists', 8: 'getChildren', 12: 'getChildren' };
    const timeline: string[] = [];
    manager.queue = (request, cb) => {
      if (request.payload?.path === '/') return queue(request, cb);
      const op = ops[request.header.type] ?? String(request.header.type);
      timeline.push(`send ${op}${request.payload?.watch ? ' (watch)' : ''}`);
      queue(request, (...a) => {
        timeline.push(`reply ${op}`);
        cb(...a);
      });
    };
    try {
      await fn(timeline);
      return timeline;
    } finally {
      if (own) Object.defineProperty(manager, 'queue', own);
      else delete (manager as { queue?: Queue }).queue;
    }
  }

  it('queues in one round trip: the listing is sent behind the create, before its reply; the own-node watch with the verdict', async () => {
    const parent = new InterProcessMutex(s1, '/mutex/pipelined');
    await (await parent.acquire()).release(); // (the parent node exists from here on)
    await parent.close();
    const m = new InterProcessMutex(s1, '/mutex/pipelined');
    const timeline = await requestTimeline(s1, async () => {
      await (await m.acquire()).release(); // a first acquire: not known to be alone
    });
    // The watch on our own node goes out as soon as the listing says we hold, ahead of the grant.
    expect(timeline.slice(0, 3)).toEqual(['send create', 'send getChildren', 'reply create']);
    expect(timeline.filter((t) => t.startsWith('send')).slice(0, 4)).toEqual(['send create', 'send getChildren', 'send exists (watch)', 'send delete']);
    expect(timeline.indexOf('send exists (watch)')).toBeLessThan(timeline.indexOf('reply getChildren') + 2);
    await m.close();
  });

  it('a participant alone last time sends 3 requests per cycle: its listing carries a child watch in place of the own-node exists', async () => {
    const m = new InterProcessMutex(s1, '/mutex/alone');
    await (await m.acquire()).release(); // alone: the next cycles arm the own-node watch through the listing
    const timeline = await requestTimeline(s1, async () => {
      await (await m.acquire()).release();
      await (await m.acquire()).release();
    });
    expect(timeline.filter((t) => t.startsWith('send'))).toEqual(['send create', 'send getChildren (watch)', 'send delete', 'send create', 'send getChildren (watch)', 'send delete']);
    await m.close();
  });

  it('a holder alone at its grant still hears its node deleted from outside, and arms its own-node watch when a successor joins', async () => {
    const raw = await rawClient(zk.connectionString);
    try {
      const a = new InterProcessMutex(s1, '/mutex/alone-lost');
      await (await a.acquire()).release(); // alone: the next grant watches through its listing
      // Deleted from outside while alone: heard through the listing's child watch.
      const l1 = await a.acquire();
      await new Promise<void>((resolve, reject) => raw.remove(a.ourPath!, -1, (e) => (e ? reject(e) : resolve())));
      await eventually(() => l1.lost, T.wait, 'the holder heard its node deleted');
      expect((l1.signal.reason as LeaseLostError).reason).toBe('expired');
      // A successor joins: the holder's own node gets its exists watch, so a deletion from
      // outside reaches holder and successor alike.
      const l2 = await a.acquire();
      const b = new InterProcessMutex(s2, '/mutex/alone-lost');
      const pb = b.acquire();
      const watchers = async (): Promise<number> => parseWchp(await zk.fourLetterWord('wchp')).get(a.ourPath!)?.length ?? 0;
      await eventually(async () => (await watchers()) === 2, T.wait, "holder's own-node watch and the successor's");
      await new Promise<void>((resolve, reject) => raw.remove(a.ourPath!, -1, (e) => (e ? reject(e) : resolve())));
      await eventually(() => l2.lost, T.wait, 'the holder heard its node deleted');
      const lb = await pb;
      expect(lb.fence > l2.fence).toBe(true);
      await lb.release();
      await Promise.all([a.close(), b.close()]);
    } finally {
      raw.close();
    }
  });

  it("hand-off: the waiter right behind the holder is granted on the holder's deletion without listing again; one further back lists again", async () => {
    const s3 = await openSession(zk.connectionString);
    try {
      const a = new InterProcessMutex(s1, '/mutex/handoff');
      const b = new InterProcessMutex(s2, '/mutex/handoff');
      const c = new InterProcessMutex(s3, '/mutex/handoff');
      const la = await a.acquire();
      const watchersOf = async (path: string): Promise<number> => parseWchp(await zk.fourLetterWord('wchp')).get(path)?.length ?? 0;
      // B queues behind A, C behind B; B gives up: C's predecessor is deleted while A still
      // holds, so C must list again (it had two nodes ahead) and wait on A.
      const pb = b.acquire({ timeoutMs: 1000 });
      await eventually(async () => b.ourPath !== undefined && (await watchersOf(a.ourPath!)) === 2, T.wait, "B's watch on A's node");
      let cGot = false;
      let lc!: Lease;
      const timeline = await requestTimeline(s3, async (sent) => {
        const pc = c.acquire().then((l) => ((cGot = true), (lc = l)));
        await eventually(async () => c.ourPath !== undefined && (await watchersOf(b.ourPath!)) === 2, T.wait, "C's watch on B's node");
        await expect(pb).rejects.toBeInstanceOf(AcquireTimeoutError);
        // (A's own-node watch, B's — dropped on B's client, on the server until it fires — and C's)
        await eventually(async () => (await watchersOf(a.ourPath!)) === 3, T.wait, "C's watch moved to A's node");
        expect(cGot).toBe(false);
        const listings = sent.filter((t) => t.startsWith('send getChildren')).length;
        // Now right behind A: A's release grants C on the deletion alone.
        await la.release();
        await pc;
        expect(sent.filter((t) => t.startsWith('send getChildren')).length).toBe(listings);
      });
      // C: create + listing, its own node, B's node; B gone: a listing, A's node; A gone: granted.
      expect(timeline.filter((t) => t.startsWith('send'))).toEqual(['send create', 'send getChildren', 'send exists (watch)', 'send exists (watch)', 'send getChildren', 'send exists (watch)']);
      expect(lc.fence > la.fence).toBe(true);
      await lc.release();
      await Promise.all([a.close(), b.close(), c.close()]);
    } finally {
      await s3.close();
    }
  });

  it('grants an uncontended lock with a fence and deletes its node on release', async () => {
    const m = new InterProcessMutex(s1, '/mutex/basic');
    const lease = await m.acquire();
    expect(typeof lease.fence).toBe('bigint');
    expect(lease.signal.aborted).toBe(false);
    expect(await m.participants()).toHaveLength(1);
    await lease.release();
    expect(lease.signal.aborted).toBe(true);
    expect((lease.signal.reason as LeaseLostError).reason).toBe('released');
    expect(await m.participants()).toHaveLength(0);
    await m.close();
  });

  it('excludes a second session until the first releases, with a higher fence', async () => {
    const a = new InterProcessMutex(s1, '/mutex/excl');
    const b = new InterProcessMutex(s2, '/mutex/excl');
    const la = await a.acquire();
    let bGot = false;
    const pb = b.acquire().then((l) => ((bGot = true), l));
    await eventually(async () => (await a.participants()).length === 2);
    expect(bGot).toBe(false);
    await la.release();
    const lb = await pb;
    expect(lb.fence > la.fence).toBe(true);
    await lb.release();
    await Promise.all([a.close(), b.close()]);
  });

  it('one object is one participant: a second acquire while it holds or waits is refused, not queued behind itself', async () => {
    const m = new InterProcessMutex(s1, '/mutex/busy', { id: 'me' });
    const l1 = await m.acquire();
    await expect(m.acquire({ timeoutMs: 1000 })).rejects.toBeInstanceOf(BusyError);
    await expect(m.tryAcquire()).rejects.toBeInstanceOf(BusyError);
    expect(m.lease).toBe(l1);
    expect(await m.holder()).toEqual({ id: 'me', fence: l1.fence });
    expect(await m.participants()).toHaveLength(1);
    await l1.release();
    expect(m.lease).toBeUndefined();
    expect(await m.holder()).toBeUndefined();
    const l2 = await m.acquire();
    expect(l2.fence > l1.fence).toBe(true);
    await m.close();
    expect(await new InterProcessMutex(s2, '/mutex/busy').participants()).toHaveLength(0);
  });

  it('tryAcquire takes a free lock and leaves no node behind when it is held', async () => {
    const a = new InterProcessMutex(s1, '/mutex/try');
    const b = new InterProcessMutex(s2, '/mutex/try');
    const la = await a.tryAcquire();
    expect(la).toBeDefined();
    expect(await b.tryAcquire()).toBeUndefined();
    expect(await a.participants()).toHaveLength(1);
    await la!.release();
    const lb = await b.tryAcquire();
    expect(lb!.fence > la!.fence).toBe(true);
    await Promise.all([a.close(), b.close()]);
  });

  it('times out with AcquireTimeoutError and removes its waiting node', async () => {
    const a = new InterProcessMutex(s1, '/mutex/timeout');
    const b = new InterProcessMutex(s2, '/mutex/timeout');
    const la = await a.acquire();
    await expect(b.acquire({ timeoutMs: 300 })).rejects.toBeInstanceOf(AcquireTimeoutError);
    expect(await a.participants()).toHaveLength(1);
    const ac = new AbortController();
    const pending = b.acquire({ signal: ac.signal });
    await eventually(async () => (await a.participants()).length === 2);
    ac.abort(new Error('changed my mind'));
    await expect(pending).rejects.toThrow('changed my mind');
    expect(await a.participants()).toHaveLength(1);
    await la.release();
    await Promise.all([a.close(), b.close()]);
  });

  it('serves waiters in FIFO order with strictly increasing fences', async () => {
    const holder = new InterProcessMutex(s1, '/mutex/fifo');
    const first = await holder.acquire();
    const order: number[] = [];
    const fences: bigint[] = [];
    const waiters = Array.from({ length: 5 }, () => new InterProcessMutex(s2, '/mutex/fifo'));
    const done: Promise<void>[] = [];
    for (const [i, w] of waiters.entries()) {
      done.push(
        w.acquire().then(async (l) => {
          order.push(i);
          fences.push(l.fence);
          await l.release();
        }),
      );
      await eventually(async () => (await holder.participants()).length === i + 2);
    }
    await first.release();
    await Promise.all(done);
    expect(order).toEqual([0, 1, 2, 3, 4]);
    for (let i = 1; i < fences.length; i++) expect(fences[i]! > fences[i - 1]!).toBe(true);
    await Promise.all([holder.close(), ...waiters.map((w) => w.close())]);
  });

  it('herd: with 100 waiters each participant watches its predecessor and its own node, and each release wakes exactly one waiter', async () => {
    const sessions = await Promise.all(Array.from({ length: 20 }, () => openSession(zk.connectionString)));
    const holder = new InterProcessMutex(s1, '/mutex/herd');
    let done: Promise<void>[] = [];
    try {
      const first = await holder.acquire();
      const before = sessions.reduce((n, s) => n + s.watchEvents, 0);
      let active = 0;
      let maxActive = 0;
      const waiters = Array.from({ length: 100 }, (_, i) => new InterProcessMutex(sessions[i % 20]!, '/mutex/herd'));
      done = waiters.map((w) =>
        w.acquire().then(async (l) => {
          active++;
          maxActive = Math.max(maxActive, active);
          await new Promise((r) => setImmediate(r));
          active--;
          await l.release();
        }),
      );
      await eventually(async () => (await holder.participants()).length === 101, T.wait, '101 queued nodes');
      const seq = (p: string): number => Number(p.slice(-10));
      // The queue in order, each node with its owner's session.
      const queue = [{ path: holder.ourPath!, session: s1.sessionId! }, ...waiters.map((w, i) => ({ path: w.ourPath!, session: sessions[i % 20]!.sessionId! }))].sort(
        (a, b) => seq(a.path) - seq(b.path),
      );
      // Every participant watches its own node (set when it queued) and every waiter its
      // predecessor, nothing else: a node is watched by its owner's session and its successor's
      // (one watch when both are the same session: the server keeps one per session and path).
      const expected = new Map(queue.map((n, k) => [n.path, [...new Set([n.session, queue[k + 1]?.session].filter((x) => x !== undefined))].sort()]));
      const watched = async (): Promise<Map<string, string[]>> => {
        const all = parseWchp(await zk.fourLetterWord('wchp'));
        return new Map([...all].filter(([p]) => p.startsWith('/mutex/herd/')).map(([p, ids]) => [p, [...ids].sort()]));
      };
      const same = (w: Map<string, string[]>): boolean => w.size === expected.size && [...expected].every(([p, ids]) => w.get(p)?.join() === ids.join());
      await eventually(async () => same(await watched()), T.wait, 'each node watched by its owner and its successor');
      expect(Object.fromEntries(await watched())).toEqual(Object.fromEntries(expected));
      await first.release();
      await Promise.all(done);
      expect(maxActive).toBe(1);
      const wakeUps = sessions.reduce((n, s) => n + s.watchEvents, 0) - before;
      expect(wakeUps).toBe(100);
    } finally {
      // (on a failure, the waiters still queued reject as their sessions close: settled here)
      await Promise.all(sessions.map((s) => s.close()));
      await Promise.allSettled(done);
      await holder.close();
    }
  });

  it('rejects bad input and use after close with named errors', async () => {
    expect(() => new InterProcessMutex(s1, 'no-slash')).toThrow(ConfigError);
    expect(() => new InterProcessMutex(s1, '/a//b')).toThrow(ConfigError);
    expect(() => new InterProcessMutex(s1, '/bad\u0001char')).toThrow(ConfigError);
    expect(() => new InterProcessMutex(s1, '/trailing/')).toThrow(ConfigError);
    expect(() => new InterProcessMutex({} as ZkSession, '/x')).toThrow(ConfigError);
    const m = new InterProcessMutex(s1, '/mutex/closed');
    await m.close();
    await expect(m.acquire()).rejects.toBeInstanceOf(ClosedError);
    const raw = await rawClient(zk.connectionString);
    expect(await children(raw, '/mutex/closed')).toEqual([]);
    raw.close();
  });
});
