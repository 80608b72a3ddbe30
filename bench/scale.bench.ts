/**
 * `npm run bench scale`: 1,000 participants in one ZooKeeper LeaderLatch election and in one etcd
 * election, all in this process (one session each), behind a leader in its own process:
 * - time for all to queue (from the first campaign call until the server holds every waiter's
 *   watch), memory per participant in this process, watches per participant on the server;
 * - failover after SIGKILL of the leader with 1,000 waiting, beside the same with 2 participants;
 * - 100 waiters on one mutex: wake-ups per release (the predecessor rule: exactly 1).
 * Each figure is the median of 3 rounds (2 and 1,000 participants interleaved).
 */
import { join } from 'node:path';
import type { Etcd3 } from 'etcd3';
import { EtcdServer, spawnWorker, ZooKeeperServer, type WorkerHandle } from '../src/testing/index.js';
import { createEtcdClient, type EtcdSession } from '../src/recipes/etcd/index.js';
import type { ZkSession } from '../src/recipes/zk/index.js';
import { etcdElection, etcdMutex, etcdSessionOn, zkLatch, zkMutex, zkSession } from '../test/peers/tenure.js';
import { interleaved, median, notes, spread, type BenchCase, type BenchRow } from './harness.js';
import { heapAfterGc } from './heap.js';
import { batched, deletionNote, etcdLeaderGone, etcdWatchers, failoverParts, settledWatchers, sleep, until, zkLeaderGone, zkMaxWatchesOnOnePath, zkTotalWatches, type LeaderGone } from './scale-kit.js';

const N = Number(process.env.TENURE_SCALE_N ?? 1000);
const WAITERS = 100;
// The leader's own session: short enough for a quick failover, long enough that its keepalives
// survive the CPU the 1,000 joiners take on 2 cores (at 2 s the etcd leader lost its lease).
const LEADER_SESSION_MS = 5000;
// Long follower sessions: 1,000 keepalives / heartbeats every TTL/3 on a loaded 2-core machine.
const FOLLOWER_SESSION_MS = 30_000;
const fixtures = join(import.meta.dirname, '..', 'test');
const heap = heapAfterGc;
let seq = 0;

interface Figures {
  queueMs: number;
  bytesPerParticipant: number;
  watchesPerParticipant: number;
  /** ZooKeeper: most watches on one path. */
  maxWatchesOnOnePath?: number;
  failoverMs: number;
  /** Of which: from the kill until the leader's key or node was deleted (the rest of its lease). */
  leaseRestMs: number;
  /** Of which: from that deletion until the next leader was elected. */
  afterDeletionMs: number;
  /** Participants whose campaign failed (session lost under load). */
  failed: number;
  /** Waiters woken by the one release of the crashed leader's key/node. */
  wakeUps: number;
}

const msSince = (t: bigint): number => Number(process.hrtime.bigint() - t) / 1e6;

/** The first of `elected` to resolve, as the hrtime of its election (a participant that lost its session does not count). */
/** The first participant elected after the leader's crash; a bench must not hang, so at most 60 s. */
const firstElected = (elected: Promise<bigint>[]): Promise<bigint> => {
  let timer: NodeJS.Timeout | undefined;
  const limit = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error('scale: no participant was elected within 60 s of the leader\'s crash')), 60_000);
  });
  return Promise.race([Promise.any(elected), limit]).finally(() => clearTimeout(timer));
};

/** Campaigns, counting the participants whose campaign failed (their session was lost under load). */
function campaigns(candidates: { campaign(): Promise<unknown> }[], failed: { n: number }): Promise<bigint>[] {
  return candidates.map((c) =>
    c.campaign().then(
      () => process.hrtime.bigint(),
      (e: unknown) => {
        failed.n++;
        throw e;
      },
    ),
  );
}

/** SIGKILLs the leader; the failover, split at the deletion of its key or node (see LeaderGone). */
async function failover(leader: WorkerHandle, gone: LeaderGone, elected: Promise<bigint>[]): Promise<Pick<Figures, 'failoverMs' | 'leaseRestMs' | 'afterDeletionMs'>> {
  try {
    const killed = process.hrtime.bigint();
    await leader.kill();
    const next = await firstElected(elected);
    await until(async () => gone.at() !== undefined, "the leader's deletion", async () => 'not seen');
    return failoverParts(killed, gone.at()!, next);
  } finally {
    await gone.close();
  }
}

/** n participants on one ZooKeeper latch: the leader in a worker, n − 1 here. */
async function zkElection(zk: ZooKeeperServer, n: number): Promise<Figures> {
  const path = `/scale/latch-${++seq}`;
  const leader = await spawnWorker(join(fixtures, 'zk', 'fixtures', 'worker.ts'), [zk.connectionString, 'latch', path, '0', '0', '-', String(LEADER_SESSION_MS)]);
  let sessions: ZkSession[] = [];
  try {
    await leader.waitFor('acquired');
    const before = heap();
    sessions = await batched(n - 1, 50, () => zkSession(zk.connectionString, FOLLOWER_SESSION_MS));
    const watches0 = await zkTotalWatches(zk);
    const t0 = process.hrtime.bigint();
    const latches = sessions.map((s, i) => zkLatch(s, path, `p${i}`));
    const failed = { n: 0 };
    const elected = campaigns(latches, failed);
    for (const e of elected) e.catch(() => undefined);
    // Each waiter watches its own node (set when it queued) and its predecessor: 2 per waiter once all queued.
    await until(async () => (await zkTotalWatches(zk)) - watches0 >= 2 * (n - 1 - failed.n), `${2 * (n - 1)} latch watches`, async () => `${(await zkTotalWatches(zk)) - watches0} watches, ${failed.n} failed`);
    const queueMs = msSince(t0);
    const bytes = (heap() - before) / (n - 1);
    const watches = (await zkTotalWatches(zk)) - watches0;
    const maxOnOnePath = await zkMaxWatchesOnOnePath(zk);
    const gone = await zkLeaderGone(zk.connectionString, path);
    const wake0 = sessions.reduce((a, s) => a + s.watchEvents, 0);
    const times = await failover(leader, gone, elected);
    await sleep(200); // any further (wrong) wake-up would land by now
    const wakeUps = sessions.reduce((a, s) => a + s.watchEvents, 0) - wake0;
    const lost = failed.n; // before close, which ends the remaining campaigns
    await batched(latches.length, 100, (i) => latches[i]!.close());
    return { queueMs, bytesPerParticipant: bytes, watchesPerParticipant: watches / (n - 1), maxWatchesOnOnePath: maxOnOnePath, ...times, wakeUps, failed: lost };
  } finally {
    await leader.kill();
    await batched(sessions.length, 100, (i) => sessions[i]!.close());
  }
}

async function keyCount(client: Etcd3, name: string): Promise<number> {
  return client.getAll().prefix(`${name}/`).count();
}

/**
 * n participants in one etcd election: the leader in a worker (TTL 2 s), n − 1 here on `clients`
 * (participant i on client i mod clients.length). etcd3 attaches a client's watchers one at a
 * time, each waiting for etcd's 'created' reply, and with 2,000 watchers and 1,000 keepalive
 * streams on one client that queue crawled (~7 watchers/s on this loaded machine): 50
 * participants per client.
 */
async function etcdElectionScale(etcd: EtcdServer, clients: Etcd3[], n: number): Promise<Figures> {
  const client = clients[0]!;
  const name = `scale/election-${++seq}`;
  const leader: WorkerHandle = await spawnWorker(join(fixtures, 'etcd', 'fixtures', 'candidate.ts'), ['elect', etcd.endpoints.join(','), name, String(LEADER_SESSION_MS / 1000)], { env: { TENURE_OPTS: JSON.stringify({ once: true }) } });
  let sessions: EtcdSession[] = [];
  try {
    await leader.waitFor('elected');
    const before = heap();
    sessions = await batched(n - 1, 50, (i) => etcdSessionOn(clients[i % clients.length]!, FOLLOWER_SESSION_MS / 1000));
    const watchers0 = await settledWatchers(etcd);
    const t0 = process.hrtime.bigint();
    const elections = sessions.map((s, i) => etcdElection(s, name, `p${i}`));
    const failed = { n: 0 };
    const elected = campaigns(elections, failed);
    for (const e of elected) e.catch(() => undefined);
    // Each waiter watches its predecessor and its own key: 2 per participant once all queued.
    // Queued = every key is in and the server's watcher count reached 2 per waiter, or, within 1 %
    // of that, stopped rising for 2 s; the time is that of the last rise.
    let seen = 0;
    let lastRise = process.hrtime.bigint();
    await until(
      async () => {
        const w = (await etcdWatchers(etcd)) - watchers0;
        if (w > seen) [seen, lastRise] = [w, process.hrtime.bigint()];
        const want = 2 * (n - 1 - failed.n);
        // Keys are counted only once the watchers are (nearly) all in: a range over the whole
        // queue every 10 ms is load on the server being measured.
        if (!(w >= 0.99 * want)) return false;
        const keysIn = (await keyCount(client, name)) >= n - 1 - failed.n; // the followers' keys
        return keysIn && (w >= want || Number(process.hrtime.bigint() - lastRise) / 1e6 > 2000);
      },
      `${2 * (n - 1)} etcd watchers`,
      async () => `${(await etcdWatchers(etcd)) - watchers0} watchers, ${await keyCount(client, name)} keys, ${failed.n} failed`,
    );
    const queueMs = Number(lastRise - t0) / 1e6;
    const bytes = (heap() - before) / (n - 1);
    const watches = (await etcdWatchers(etcd)) - watchers0;
    const gone = await etcdLeaderGone(client, `${name}/`);
    const wake0 = elections.reduce((a, e) => a + e.wakeUps(), 0);
    const times = await failover(leader, gone, elected);
    await sleep(200);
    const wakeUps = elections.reduce((a, e) => a + e.wakeUps(), 0) - wake0;
    const lost = failed.n; // before close, which ends the remaining campaigns
    await batched(elections.length, 100, (i) => elections[i]!.close());
    return { queueMs, bytesPerParticipant: bytes, watchesPerParticipant: watches / (n - 1), ...times, wakeUps, failed: lost };
  } finally {
    await leader.kill();
    await batched(sessions.length, 100, (i) => sessions[i]!.close().catch(() => undefined));
  }
}

/** A holder and `WAITERS` queued behind it; each grant releases at once. Wake-ups per release. */
async function wakeUpsPerRelease(open: () => Promise<{ acquire(): Promise<{ release(): Promise<void> }>; wakeUps(): number; close(): Promise<void> }>): Promise<number> {
  const all = await batched(WAITERS + 1, 50, () => open());
  try {
    const first = await all[0]!.acquire();
    let granted = 0;
    const rest = all.slice(1).map(async (c) => {
      const lease = await c.acquire();
      granted++;
      await lease.release();
    });
    await sleep(1000); // every waiter queued (a late one only joins behind: its wake-up still counts once)
    const wake0 = all.reduce((a, c) => a + c.wakeUps(), 0);
    await first.release();
    await Promise.all(rest);
    return (all.reduce((a, c) => a + c.wakeUps(), 0) - wake0) / granted;
  } finally {
    await Promise.all(all.map((c) => c.close()));
  }
}

const scaleRow = (group: string, scenario: string, impl: string, ms: number, extra: string): BenchRow => ({ group, scenario, impl, p50Ms: ms, notes: extra });

async function run(): Promise<BenchRow[]> {
  const rows: BenchRow[] = [];
  const zk = await new ZooKeeperServer().start();
  const etcd = await new EtcdServer().start();
  const clients = await Promise.all(Array.from({ length: Math.ceil(N / 50) }, () => createEtcdClient({ hosts: etcd.endpoints })));
  const client = clients[0]!;
  try {
    for (const [group, measure] of [
      ['scale: ZooKeeper LeaderLatch', (n: number) => zkElection(zk, n)],
      ['scale: etcd EtcdElection', (n: number) => etcdElectionScale(etcd, clients, n)],
    ] as const) {
      if (process.env.TENURE_SCALE_ONLY && !group.includes(process.env.TENURE_SCALE_ONLY)) continue;
      const sizes = [`${N} participants`, '2 participants'];
      let r: Awaited<ReturnType<typeof interleaved<Figures>>>;
      try {
        r = await interleaved(sizes, (size) => measure(Number(size.split(' ')[0])), (f) => f.failoverMs, { rounds: 3, warmup: 0 });
      } catch (e) {
        // One backend's failure must not lose the other's figures.
        rows.push({ group, scenario: 'FAILED', impl: 'tenure', notes: String(e instanceof Error ? e.message : e).slice(0, 300) });
        continue;
      }
      const big = r.get(sizes[0]!)!;
      const small = r.get(sizes[1]!)!;
      const queue = big.median;
      const queueMs = big.all.map((f) => f.queueMs); // every round's, for a median of its own
      rows.push(
        scaleRow(
          group,
          `${N} participants: all queued (first campaign → every waiter's watch on the server)`,
          'tenure',
          median(queueMs),
          notes(`${(queue.bytesPerParticipant / 1024).toFixed(1)} KiB heap per participant (session + client + recipe)`, `${queue.watchesPerParticipant.toFixed(2)} server watches per participant`, queue.maxWatchesOnOnePath !== undefined && `at most ${queue.maxWatchesOnOnePath} watch on one path`, `heap and watches: round with the median failover`, spread(queueMs, 'ms')),
        ),
      );
      // The part of a failover that could grow with the waiters: from the leader's deletion on.
      const after = (rs: Figures[]): number[] => rs.map((f) => f.afterDeletionMs);
      const rest = (rs: Figures[]): string => `the rest of the leader's lease after the kill ${rs.map((f) => f.leaseRestMs.toFixed(0)).join('/')} ms`;
      rows.push(
        scaleRow(
          group,
          `failover after leader SIGKILL, ${N} waiting`,
          'tenure',
          big.median.failoverMs,
          notes(
            `${(big.median.failoverMs / small.median.failoverMs).toFixed(2)}× the 2-participant figure`,
            deletionNote(after(big.all), after(small.all)),
            rest(big.all),
            `${big.median.wakeUps} waiter(s) woken by the crash`,
            big.median.failed > 0 && `${big.median.failed} participant(s) lost their session under load`,
            spread(big.keys, 'ms'),
            `leader session ${LEADER_SESSION_MS} ms`,
          ),
        ),
      );
      rows.push(scaleRow(group, 'failover after leader SIGKILL, 2 participants', 'tenure', small.median.failoverMs, notes(rest(small.all), spread(small.keys, 'ms'))));
    }
    const zkWake = await wakeUpsPerRelease(async () => {
      const s = await zkSession(zk.connectionString, FOLLOWER_SESSION_MS);
      const m = zkMutex(s, '/scale/wake');
      return {
        acquire: () => m.acquire(),
        wakeUps: () => s.watchEvents,
        close: async () => {
          await m.close();
          await s.close();
        },
      };
    });
    rows.push({ group: 'scale: ZooKeeper InterProcessMutex', scenario: `${WAITERS} waiters: wake-ups per release`, impl: 'tenure', notes: `${zkWake.toFixed(2)} (watch notifications received / grants)` });
    const etcdWake = await wakeUpsPerRelease(async () => {
      const s = await etcdSessionOn(client, FOLLOWER_SESSION_MS / 1000);
      const m = etcdMutex(s, 'scale/wake');
      return {
        acquire: () => m.acquire(),
        wakeUps: () => m.wakeUps(),
        close: async () => {
          await m.close();
          await s.close();
        },
      };
    });
    rows.push({ group: 'scale: etcd EtcdMutex', scenario: `${WAITERS} waiters: wake-ups per release`, impl: 'tenure', notes: `${etcdWake.toFixed(2)} (predecessor deletions seen / grants)` });
  } finally {
    for (const c of clients) c.close();
    await Promise.all([zk.stop(), etcd.stop()]);
  }
  return rows;
}

export const cases: BenchCase[] = [{ group: 'scale', run }];
