/**
 * Wire compatibility with Apache Curator 5.4 (Debian's libcurator-*-java, driven by
 * test/peers/CuratorPeer.java): a Java service on Curator and tenure share one InterProcessMutex
 * path and one LeaderLatch path on a real ZooKeeper. Exclusion is proven two ways: a sentinel
 * znode each holder creates (a create that finds it is a second holder), and hold intervals
 * stamped with CLOCK_MONOTONIC (Java's System.nanoTime and Node's hrtime) that never overlap.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import zookeeper from 'node-zookeeper-client';
import { ZooKeeperServer } from '../../src/testing/index.js';
import type { ZkSession } from '../../src/recipes/zk/index.js';
import { CuratorPeer } from '../peers/curator.js';
import { zkLatch, zkMutex, zkSession } from '../peers/tenure.js';
import { children, rawClient } from '../zk/helpers.js';
import { pollValue } from '../helpers/wait.js';

let zk: ZooKeeperServer;
let raw: zookeeper.Client;
let java: CuratorPeer;
const sessions: ZkSession[] = [];
const extraPeers: CuratorPeer[] = [];

beforeAll(async () => {
  zk = await new ZooKeeperServer().start();
  [raw, java] = await Promise.all([rawClient(zk.connectionString), CuratorPeer.start(zk.connectionString)]);
});
afterEach(async () => {
  await Promise.all(sessions.splice(0).map((s) => s.close()));
  await Promise.all(extraPeers.splice(0).map((p) => p.close()));
});
afterAll(async () => {
  await java?.close();
  raw?.close();
  await zk?.stop();
});

const unique = (base: string): string => `/interop/${base}-${randomBytes(4).toString('hex')}`;
const session = async (timeoutMs?: number): Promise<ZkSession> => {
  const s = await zkSession(zk.connectionString, timeoutMs);
  sessions.push(s);
  return s;
};
/** Waits until `count` nodes are queued under `path` (the newcomer waits); returns their names. */
const queued = (path: string, count: number): Promise<string[]> =>
  pollValue(async () => {
    const ch = await children(raw, path);
    return ch.length === count ? ch : undefined;
  });

type Span = { side: 'java' | 'node'; start: bigint; end: bigint };

describe('tenure and Curator on one InterProcessMutex path', () => {
  it('Curator and tenure holders never overlap while both loop on one path (sentinel znode and hold intervals)', async () => {
    const path = unique('mutex');
    const sentinel = `${path}-sentinel`;
    const rounds = 40;
    const mutex = zkMutex(await session(), path);
    const nodeSide = (async () => {
      const spans: Span[] = [];
      let violations = 0;
      for (let i = 0; i < rounds; i++) {
        const lease = await mutex.acquire();
        const start = process.hrtime.bigint();
        const mine = await new Promise<boolean>((resolve, reject) =>
          raw.create(sentinel, Buffer.alloc(0), zookeeper.CreateMode.EPHEMERAL, (e) => (!e ? resolve(true) : (e as zookeeper.Exception).getCode?.() === zookeeper.Exception.NODE_EXISTS ? resolve(false) : reject(e))),
        );
        if (!mine) violations++;
        await new Promise((r) => setTimeout(r, 2));
        if (mine) await new Promise<void>((resolve, reject) => raw.remove(sentinel, -1, (e) => (e ? reject(e) : resolve())));
        spans.push({ side: 'node', start, end: process.hrtime.bigint() });
        await lease.release();
      }
      return { violations, spans };
    })();
    const javaSide = java.call('mutex.loop', 'loop', path, rounds, sentinel, 2);
    const [n, j] = await Promise.all([nodeSide, javaSide]);
    expect(n.violations).toBe(0);
    expect(j.violations).toBe(0);
    const javaSpans = (j.spans as [string, string][]).map(([s, e]): Span => ({ side: 'java', start: BigInt(s), end: BigInt(e) }));
    const all = [...n.spans, ...javaSpans].sort((a, b) => (a.start < b.start ? -1 : 1));
    expect(all).toHaveLength(2 * rounds);
    for (let i = 1; i < all.length; i++) expect(all[i]!.start > all[i - 1]!.end).toBe(true);
    // The queue is FIFO, so the two sides took turns: the lock passed both ways, many times.
    const turns = all.filter((s, i) => i > 0 && s.side !== all[i - 1]!.side).length;
    expect(turns).toBeGreaterThanOrEqual(rounds / 2);
  });

  it("tenure waits behind Curator's holder and is granted only after Curator releases, and the reverse", async () => {
    const path = unique('mutex');
    const mutex = zkMutex(await session(), path);
    // Curator holds; tenure queues behind it.
    expect((await java.call('mutex.acquire', 'a', path, 10_000)).acquired).toBe(true);
    let grantedAt: bigint | undefined;
    const acquiring = mutex.acquire().then((lease) => {
      grantedAt = process.hrtime.bigint();
      return lease;
    });
    const names = await queued(path, 2);
    expect(names.every((c) => /^_c_[0-9a-f-]{36}-lock-\d{10}$/.test(c))).toBe(true); // one node layout
    expect(grantedAt).toBeUndefined();
    const released = BigInt((await java.call('mutex.release', 'a')).t as string);
    const lease = await acquiring;
    expect(grantedAt! > released).toBe(true);
    // tenure holds; Curator queues behind it.
    const javaAcquire = java.call('mutex.acquire', 'b', path, 20_000);
    await queued(path, 2);
    const tenureReleased = process.hrtime.bigint();
    await lease.release();
    const got = await javaAcquire;
    expect(got.acquired).toBe(true);
    expect(BigInt(got.t as string) > tenureReleased).toBe(true);
    await java.call('mutex.release', 'b');
  });
});

describe('tenure and Curator on one LeaderLatch path', () => {
  it('each sees the other as leader by its id, and leadership passes both ways on close', async () => {
    const path = unique('latch');
    await java.call('latch.start', 'l1', path, 'java-1');
    expect((await java.call('latch.await', 'l1', 10_000)).leader).toBe(true);
    const node = zkLatch(await session(), path, 'node-1');
    let electedAt: bigint | undefined;
    const campaigning = node.campaign().then((t) => {
      electedAt = process.hrtime.bigint();
      return t;
    });
    const names = await queued(path, 2);
    expect(names.every((c) => /^_c_[0-9a-f-]{36}-latch-\d{10}$/.test(c))).toBe(true);
    expect(await node.leaderId()).toBe('java-1');
    expect(electedAt).toBeUndefined();
    const closed = BigInt((await java.call('latch.close', 'l1')).t as string);
    const term = await campaigning;
    expect(electedAt! > closed).toBe(true);
    // A new Curator participant reads tenure's node data as the leader's id and waits behind it.
    await java.call('latch.start', 'l2', path, 'java-2');
    await queued(path, 2);
    expect(await java.call('latch.leader', 'l2')).toMatchObject({ leaderId: 'node-1', isLeader: false });
    expect((await java.call('latch.await', 'l2', 200)).leader).toBe(false);
    const resigned = process.hrtime.bigint();
    await node.close();
    expect(term.signal.aborted).toBe(true);
    const elected = await java.call('latch.await', 'l2', 20_000);
    expect(elected.leader).toBe(true);
    expect(BigInt(elected.t as string) > resigned).toBe(true);
    await java.call('latch.close', 'l2');
  });

  it("a SIGKILLed Curator leader's latch passes to tenure once its session expires", async () => {
    const path = unique('latch');
    const doomed = await CuratorPeer.start(zk.connectionString, { sessionTimeoutMs: 2000 });
    extraPeers.push(doomed);
    await doomed.call('latch.start', 'l', path, 'java-doomed');
    expect((await doomed.call('latch.await', 'l', 10_000)).leader).toBe(true);
    const node = zkLatch(await session(), path, 'node-1');
    const campaigning = node.campaign();
    await queued(path, 2);
    const killedAt = process.hrtime.bigint();
    await doomed.kill();
    const term = await campaigning;
    expect(process.hrtime.bigint() > killedAt).toBe(true);
    expect(await node.leaderId()).toBe('node-1');
    expect((await children(raw, path)).length).toBe(1); // the dead leader's node went with its session
    await term.release();
    await node.close();
  });
});
