/**
 * ZooKeeper lock benchmarks: tenure's InterProcessMutex beside Apache Curator 5.4's (the same
 * recipe in Java, run by test/peers/CuratorPeer.java in its own JVM; its loops are timed inside
 * the JVM, so no IPC is measured), beside a naive getChildren-watch lock (bench/zk-naive.ts) and
 * beside floors on raw clients (a cycle's two writes alone; a fair queue's four requests per
 * grant; the same with what tenure's guarantees add on the wire), each floor sending its requests
 * through tenure's own request functions (src/recipes/zk/ops.ts) with nothing around them, on one
 * ZooKeeper server, interleaved over rounds. Also: ZooKeeper requests per
 * acquire+release (the server's packet counter), the server's and the clients' CPU per contended
 * grant, and LeaderLatch failover after SIGKILL.
 */
import { join } from 'node:path';
import { fourLetterWord, spawnWorker, ZooKeeperServer } from '../src/testing/index.js';
import type { ZkSession } from '../src/recipes/zk/index.js';
import { CuratorPeer } from '../test/peers/curator.js';
import { zkLatch, zkMutex, zkSession } from '../test/peers/tenure.js';
import { cpuNote, interleaved, notes, percentile, processCpuUs, spread, timeLoop, type BenchCase, type BenchRow } from './harness.js';
import { NaiveLock, rawClient } from './zk-naive.js';
import { randomUUID } from 'node:crypto';
import { oneWrite, zkCreateEphemeralSequential, zkExists, zkGetChildren, zkRemove } from '../src/recipes/zk/ops.js';
import { loadZookeeper } from '../src/recipes/zk/peer.js';

const GROUP = 'zk mutex';
const SESSION_MS = 10_000;
const CURATOR = 'Curator 5.4 InterProcessMutex';
const TENURE = 'tenure InterProcessMutex';
const NAIVE = 'naive getChildren-watch lock';
/** Not a lock: the two writes every ZooKeeper lock cycle needs (its node's create and delete), back to back on a raw client. */
const FLOOR = 'floor: create + delete only (raw client, no lock)';
/** The contended floor: the fewest requests a fair queue lock sends per grant, on raw clients (see queueFloorContender). */
const QUEUE_FLOOR = 'floor: fair queue, 4 requests per grant (raw clients, no lease)';
/** The contended floor with what tenure's guarantees send (see queueFloorContender's `guarded`). */
const GUARDED_FLOOR = 'floor: fair queue + protected name, id, own-node watch (raw clients, no lease)';

/** `calls`: every call the loop made, its untimed warm-up included (absent: the peer counts only the timed ones). */
type Solo = { opsPerSec: number; p50Ms: number; p99Ms: number; count: number; calls?: number };
/** `clientCpuUsPerGrant`: this process's CPU per grant (the contenders driven from here; for Curator, its JVM's). */
type Ten = { opsPerSec: number; p50Ms: number; p99Ms: number; min: number; max: number; wakeUpsPerGrant?: number; clientCpuUsPerGrant?: number };
type Hand = { p50Ms: number; p99Ms: number; count: number };

/** One implementation's three measurements on `path`. */
interface Impl {
  uncontended(path: string, durationMs: number): Promise<Solo>;
  contended(path: string, durationMs: number): Promise<Ten>;
  handoff(path: string, durationMs: number): Promise<Hand>;
}

interface Contender {
  acquire(): Promise<() => Promise<void>>;
  wakeUps(): number;
  close(): Promise<void>;
}

async function tenureContender(conn: string, path: string): Promise<Contender> {
  const s: ZkSession = await zkSession(conn, SESSION_MS);
  const m = zkMutex(s, path);
  return {
    acquire: async () => {
      const l = await m.acquire();
      return () => l.release();
    },
    wakeUps: () => s.watchEvents,
    close: async () => {
      await m.close();
      await s.close();
    },
  };
}

async function naiveContender(conn: string, path: string): Promise<Contender> {
  const c = await rawClient(conn, path);
  const lock = new NaiveLock(c, path);
  return {
    acquire: async () => {
      const node = await lock.acquire();
      return () => lock.release(node);
    },
    wakeUps: () => lock.wakeUps,
    close: async () => c.close(),
  };
}

/**
 * The floor under contention: a fair queue lock reduced to the requests every such lock sends per
 * grant — its node's create with the listing right behind it (one write), an `exists` watch on the
 * predecessor, the delete — and no client work beyond them: no lease, no fence, no timeouts, no
 * retries. The waiter right behind the holder is granted on its deletion without listing again
 * (as tenure's is); one further back lists again. Not a safe lock (nothing survives a connection
 * loss): the ceiling the lock rows are read against.
 *
 * `guarded`: the same floor with what tenure's guarantees put on the wire — a protected node name
 * (`_c_<uuid>-lock-`, found again after a connection loss), the participant's id as its data, and
 * the own-node `exists` watch (a holder hears its node deleted from outside as fast as its
 * successor): sent with the predecessor watch in one write by a waiter, on its listing's verdict
 * by a holder. The ceiling for a lock that keeps those guarantees.
 */
async function queueFloorContender(conn: string, path: string, guarded = false): Promise<Contender> {
  await loadZookeeper();
  const c = await rawClient(conn, path);
  let wakeUps = 0;
  /** Resolves when `node` is gone (at once if it is). */
  const gone = (node: string): Promise<void> =>
    new Promise((resolve, reject) =>
      zkExists(c, node, () => {
        wakeUps++;
        resolve();
      }).then((stat) => stat === null && resolve(), reject),
    );
  const id = Buffer.from(randomUUID());
  /** Names in queue order: by the 10-digit sequence every name ends with. */
  const bySequence = (a: string, b: string): number => (a.slice(-10) < b.slice(-10) ? -1 : 1);
  return {
    acquire: async () => {
      const name = guarded ? `${path}/_c_${randomUUID()}-lock-` : `${path}/lock-`;
      let listing!: Promise<string[]>;
      const created = oneWrite(c, () => {
        const create = zkCreateEphemeralSequential(c, name, guarded ? id : Buffer.alloc(0));
        listing = zkGetChildren(c, path); // sent right behind the create: it holds the new node
        return create;
      });
      const node = (await created).path;
      const mine = node.slice(path.length + 1);
      let watchingOwn = !guarded;
      const watchOwn = (): void => {
        if (watchingOwn) return;
        watchingOwn = true;
        void zkExists(c, node, () => undefined).catch(() => undefined);
      };
      for (;;) {
        const sorted = (await listing).sort(bySequence);
        const at = sorted.indexOf(mine);
        if (at === 0) break;
        await oneWrite(c, () => {
          watchOwn();
          return gone(`${path}/${sorted[at - 1]!}`);
        });
        if (at === 1) break; // it was the holder: nobody else is ahead
        listing = zkGetChildren(c, path);
      }
      watchOwn();
      return () => zkRemove(c, node);
    },
    wakeUps: () => wakeUps,
    close: async () => c.close(),
  };
}

/** The measurements for a lock driven from this process. */
function nodeImpl(conn: string, make: (conn: string, path: string) => Promise<Contender>): Impl {
  return {
    async uncontended(path, durationMs) {
      const c = await make(conn, path);
      const r = await timeLoop(async () => (await c.acquire())(), durationMs);
      await c.close();
      return r;
    },
    async contended(path, durationMs) {
      const cs = await Promise.all(Array.from({ length: 10 }, () => make(conn, path)));
      await (await cs[0]!.acquire())();
      const waits: number[] = [];
      const per = cs.map(() => 0);
      const wake0 = cs.reduce((n, c) => n + c.wakeUps(), 0);
      const cpu0 = process.cpuUsage();
      const start = performance.now();
      const end = start + durationMs;
      await Promise.all(
        cs.map(async (c, i) => {
          while (performance.now() < end) {
            const t = performance.now();
            const release = await c.acquire();
            waits.push(performance.now() - t);
            per[i]!++;
            await release();
          }
        }),
      );
      const secs = (performance.now() - start) / 1000;
      const cpu = process.cpuUsage(cpu0);
      const wakeUps = cs.reduce((n, c) => n + c.wakeUps(), 0) - wake0;
      await Promise.all(cs.map((c) => c.close()));
      return { opsPerSec: waits.length / secs, p50Ms: percentile(waits, 50), p99Ms: percentile(waits, 99), min: Math.min(...per), max: Math.max(...per), wakeUpsPerGrant: wakeUps / waits.length, clientCpuUsPerGrant: (cpu.user + cpu.system) / waits.length };
    },
    async handoff(path, durationMs) {
      const [a, b] = await Promise.all([make(conn, path), make(conn, path)]);
      const lat: number[] = [];
      const end = performance.now() + durationMs;
      let [holder, waiter] = [a, b];
      let release = await holder.acquire();
      while (performance.now() < end || lat.length < 5) {
        const next = waiter.acquire();
        await new Promise((r) => setTimeout(r, 2)); // the waiter's node and watch are in place
        const t = performance.now();
        await Promise.all([release(), next.then(() => lat.push(performance.now() - t))]);
        release = await next;
        [holder, waiter] = [waiter, holder];
      }
      await release();
      await Promise.all([a.close(), b.close()]);
      return { p50Ms: percentile(lat, 50), p99Ms: percentile(lat, 99), count: lat.length };
    },
  };
}

function curatorImpl(peer: CuratorPeer): Impl {
  return {
    uncontended: async (path, ms) => (await peer.call('bench.uncontended', 'bench', path, ms)) as unknown as Solo,
    contended: async (path, ms) => (await peer.call('bench.contended', 'bench', path, 10, ms)) as unknown as Ten,
    handoff: async (path, ms) => (await peer.call('bench.handoff', 'bench', path, ms)) as unknown as Hand,
  };
}

/** The floor: an ephemeral sequential create and its delete, nothing else, on one raw client. */
async function floorLoop(conn: string, path: string, durationMs: number): Promise<Solo> {
  await loadZookeeper();
  const c = await rawClient(conn, path);
  try {
    return await timeLoop(async () => zkRemove(c, (await zkCreateEphemeralSequential(c, `${path}/n-`, Buffer.alloc(0))).path), durationMs);
  } finally {
    c.close();
  }
}

/** Requests the server received (every client's packets, pings included). */
async function packetsReceived(zk: ZooKeeperServer): Promise<number> {
  const m = /zk_packets_received\s+(\d+)/.exec(await fourLetterWord(zk.port, 'mntr'));
  return Number(m?.[1] ?? NaN);
}

async function mutexRows(zk: ZooKeeperServer, peer: CuratorPeer, durationMs: number): Promise<BenchRow[]> {
  const conn = zk.connectionString;
  const impls = new Map<string, Impl>([
    [TENURE, nodeImpl(conn, tenureContender)],
    [CURATOR, curatorImpl(peer)],
    [NAIVE, nodeImpl(conn, naiveContender)],
  ]);
  const names = [...impls.keys()];
  const slug = (impl: string): string => impl.replace(/\W+/g, '').toLowerCase().slice(0, 48);
  const uncontended = (impl: string, path: string, ms: number): Promise<Solo> => (impl === FLOOR ? floorLoop(conn, path, ms) : impls.get(impl)!.uncontended(path, ms));
  // Warm every implementation (JIT on both sides, parent nodes) before anything is measured.
  for (const impl of [...names, FLOOR]) await uncontended(impl, `/bench/${slug(impl)}/u`, Math.min(1000, durationMs));
  const solo = await interleaved([...names, FLOOR], async (impl) => {
    const before = await packetsReceived(zk);
    const r = await uncontended(impl, `/bench/${slug(impl)}/u`, durationMs);
    const requests = (await packetsReceived(zk)) - before - 1; // minus the mntr itself
    return { ...r, requestsPerCycle: requests / (r.calls ?? r.count) };
  }, (r) => r.opsPerSec);
  const floors = new Map<string, Impl>([
    [QUEUE_FLOOR, nodeImpl(conn, (c, p) => queueFloorContender(c, p))],
    [GUARDED_FLOOR, nodeImpl(conn, (c, p) => queueFloorContender(c, p, true))],
  ]);
  const ten = await interleaved([...names, ...floors.keys()], async (impl) => {
    // The server's CPU over the round, per grant: on 2 cores the server and the clients share the
    // machine, so what each spends per grant bounds the rate.
    // Curator's contenders are its JVM's threads: their CPU is that process's over the round.
    const before = processCpuUs(zk.pid!);
    const jvm = impl === CURATOR ? processCpuUs(peer.pid) : 0;
    const r = await (floors.get(impl) ?? impls.get(impl)!).contended(`/bench/${slug(impl)}/c`, durationMs);
    const grants = (r.opsPerSec * durationMs) / 1000;
    return { ...r, serverCpuUsPerGrant: (processCpuUs(zk.pid!) - before) / grants, clientCpuUsPerGrant: impl === CURATOR ? (processCpuUs(peer.pid) - jvm) / grants : r.clientCpuUsPerGrant };
  }, (r) => r.opsPerSec);
  const hand = await interleaved(names, (impl) => impls.get(impl)!.handoff(`/bench/${slug(impl)}/h`, durationMs), (r) => r.p50Ms);
  const rows: BenchRow[] = [];
  for (const impl of [...names, FLOOR]) {
    const s = solo.get(impl)!;
    rows.push({ group: GROUP, scenario: 'uncontended acquire+release', impl, opsPerSec: s.median.opsPerSec, opsPerRound: s.all.map((a) => a.opsPerSec), p50Ms: s.median.p50Ms, p99Ms: s.median.p99Ms, notes: notes(`${s.median.requestsPerCycle.toFixed(2)} ZooKeeper requests per cycle`, spread(s.keys, 'ops/s')) });
  }
  for (const impl of [...names, QUEUE_FLOOR, GUARDED_FLOOR]) {
    const t = ten.get(impl)!;
    const w = t.median.wakeUpsPerGrant;
    const clientCpu = t.all.map((a) => a.clientCpuUsPerGrant).filter((x) => x !== undefined);
    rows.push({ group: GROUP, scenario: '10 contenders, 10 sessions (wait)', impl, opsPerSec: t.median.opsPerSec, opsPerRound: t.all.map((a) => a.opsPerSec), p50Ms: t.median.p50Ms, p99Ms: t.median.p99Ms, notes: notes(`fairness min/max ${t.median.min}/${t.median.max}`, w !== undefined && `watch wake-ups per grant ${w.toFixed(2)}`, impl === CURATOR && '10 threads in one JVM', cpuNote(t.all.map((a) => a.serverCpuUsPerGrant), 'server', 'grant'), clientCpu.length > 0 && cpuNote(clientCpu, 'client', 'grant'), spread(t.keys, 'ops/s')) });
  }
  for (const impl of names) {
    const h = hand.get(impl)!;
    rows.push({ group: GROUP, scenario: 'hand-off: release → next holder granted', impl, p50Ms: h.median.p50Ms, p99Ms: h.median.p99Ms, notes: notes(`${h.median.count} hand-offs`, spread(h.keys, 'p50 ms')) });
  }
  return rows;
}

const LATCH_SESSION_MS = 2000;
const zkWorker = join(import.meta.dirname, '..', 'test', 'zk', 'fixtures', 'worker.ts');

/** Children of `path`, counted through a throwaway raw client. */
async function waitQueued(conn: string, path: string, count: number): Promise<void> {
  const c = await rawClient(conn, path);
  try {
    for (let i = 0; i < 1000; i++) {
      const n = await new Promise<number>((resolve) => c.getChildren(path, (e, ch) => resolve(e ? 0 : ch.length)));
      if (n >= count) return;
      await new Promise((r) => setTimeout(r, 10));
    }
    throw new Error(`${path}: ${count} participants never queued`);
  } finally {
    c.close();
  }
}

/** ms from the leader's SIGKILL to the follower's election: tenure leader in a worker, tenure follower here. */
async function tenureFailover(conn: string, path: string): Promise<number> {
  const leader = await spawnWorker(zkWorker, [conn, 'latch', path, '0', '0', '-', String(LATCH_SESSION_MS)]);
  try {
    await leader.waitFor('acquired');
    const s = await zkSession(conn, SESSION_MS);
    const follower = zkLatch(s, path, 'follower');
    const elected = follower.campaign().then(() => process.hrtime.bigint());
    await waitQueued(conn, path, 2);
    const killed = process.hrtime.bigint();
    await leader.kill();
    const at = await elected;
    await follower.close();
    await s.close();
    return Number(at - killed) / 1e6;
  } finally {
    await leader.kill();
  }
}

/** The same with Curator on both sides: the leader's JVM is SIGKILLed. */
async function curatorFailover(conn: string, follower: CuratorPeer, path: string): Promise<number> {
  const leader = await CuratorPeer.start(conn, { sessionTimeoutMs: LATCH_SESSION_MS });
  try {
    await leader.call('latch.start', 'l', path, 'leader');
    await leader.call('latch.await', 'l', 10_000);
    await follower.call('latch.start', 'f', path, 'follower');
    await waitQueued(conn, path, 2);
    const killed = process.hrtime.bigint();
    await leader.kill();
    const r = await follower.call('latch.await', 'f', 30_000);
    await follower.call('latch.close', 'f');
    return Number(BigInt(r.t as string) - killed) / 1e6;
  } finally {
    await leader.kill();
  }
}

async function failoverRows(zk: ZooKeeperServer, peer: CuratorPeer): Promise<BenchRow[]> {
  const conn = zk.connectionString;
  let n = 0;
  const impls: Record<string, () => Promise<number>> = {
    'tenure LeaderLatch': () => tenureFailover(conn, `/bench/latch/t${++n}`),
    'Curator 5.4 LeaderLatch': () => curatorFailover(conn, peer, `/bench/latch/c${++n}`),
  };
  const r = await interleaved(Object.keys(impls), (impl) => impls[impl]!(), (ms) => ms, { rounds: 3, warmup: 0 });
  return [...r].map(([impl, { median, keys }]) => ({
    group: 'zk latch',
    scenario: `failover: leader SIGKILLed → follower elected (session ${LATCH_SESSION_MS} ms)`,
    impl,
    p50Ms: median,
    notes: notes('leader in its own process, follower waiting', spread(keys, 'ms')),
  }));
}

/** One ZooKeeper server and one Curator JVM for every ZooKeeper group. */
async function withZk(fn: (zk: ZooKeeperServer, peer: CuratorPeer) => Promise<BenchRow[]>): Promise<BenchRow[]> {
  const zk = await new ZooKeeperServer().start();
  const peer = await CuratorPeer.start(zk.connectionString, { sessionTimeoutMs: SESSION_MS });
  try {
    return await fn(zk, peer);
  } finally {
    await peer.close();
    await zk.stop();
  }
}

export const cases: BenchCase[] = [
  { group: GROUP, run: ({ durationMs }) => withZk((zk, peer) => mutexRows(zk, peer, durationMs)) },
  { group: 'zk latch', run: () => withZk((zk, peer) => failoverRows(zk, peer)) },
];
