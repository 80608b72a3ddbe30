/**
 * `npm run bench 'scale 10k'` (issue 22): 10,000 participants in one ZooKeeper LeaderLatch
 * election and in one etcd election, each participant with its own session, spread over worker
 * processes (TENURE_SCALE_10K_PER_PROC each, default 1,000: bench/fixtures/participants.ts)
 * behind a leader in a process of its own, the one SIGKILLed:
 * - time for all to queue (from the 'go' sent to every worker until the server holds every
 *   waiter's watch; each worker joins TENURE_SCALE_10K_JOINS at a time), heap per participant (each worker's heapUsed delta / its participants),
 *   server watches per participant;
 * - failover (SIGKILL of the leader's process → the next leader elected, stamped in its worker)
 *   with 10,000 waiting, beside the same with 2 participants (median of 3 rounds).
 * One 10,000 round per backend (its queue takes the two shared cores for a while).
 * TENURE_SCALE_10K_N sets the size, TENURE_SCALE_ONLY (zk, etcd) one backend.
 */
import { join } from 'node:path';
import { EtcdServer, spawnWorker, ZooKeeperServer, type WorkerHandle } from '../src/testing/index.js';
import { notes, percentile, type BenchCase, type BenchRow } from './harness.js';
import { createEtcdClient } from '../src/recipes/etcd/index.js';
import { deletionNote, etcdLeaderGone, etcdWatchers, failoverParts, settledWatchers, sleep, until, zkLeaderGone, zkMaxWatchesOnOnePath, zkTotalWatches, type LeaderGone } from './scale-kit.js';

const N = Number(process.env.TENURE_SCALE_10K_N ?? 10_000);
const PER_PROC = Number(process.env.TENURE_SCALE_10K_PER_PROC ?? 1000);
/** How long the queue may take before the row says it failed (with how far it got). */
const QUEUE_TIMEOUT_MS = Number(process.env.TENURE_SCALE_10K_TIMEOUT_MS ?? 150_000);
/** etcd sessions per client in a worker (the 1,000 bench's choice: etcd3 attaches a client's watchers one at a time). */
const ETCD_PER_CLIENT = Number(process.env.TENURE_SCALE_10K_PER_CLIENT ?? 50);
/**
 * Joins in flight per worker process (50 over the 10 processes). All 10,000 at once put both
 * servers' request latency past the sessions' own bounds and the joins collapsed into retries:
 * ZooKeeper answered in up to 55 s (every join lists up to 10,000 children), past a request's
 * 5 s silence bound and the heartbeat's 2/3 of the TTL, so sessions dropped their links and
 * joined again, listing again; etcd's attempts (1.5 s deadline each) expired likewise.
 */
const JOINS_IN_FLIGHT = Number(process.env.TENURE_SCALE_10K_JOINS ?? 5);
/**
 * The etcd participants' `callTimeoutMs` (default 5 s): how long a txn keeps retrying before the
 * campaign rejects with StoreUnavailableError. Each attempt has a 1.5 s deadline set before etcd3
 * dispatches it; a worker process starved of CPU (1,000 sessions on 2 shared cores) dispatched
 * some after that deadline had passed ("Deadline exceeded after 0.000s, waiting for name
 * resolution": the request never left the process) and after 5 s of that the campaigns failed
 * with etcd itself answering in milliseconds.
 */
const ETCD_CALL_TIMEOUT_MS = 60_000;
const SMALL_ROUNDS = 3;
// As in scale.bench.ts: the leader's session short enough for a quick failover, long enough to
// survive the CPU the joiners take; followers' long (10,000 heartbeats every TTL/3).
const LEADER_SESSION_MS = 5000;
const FOLLOWER_SESSION_MS = 30_000;
/**
 * etcd followers' TTL at 10,000: with 30 s, workers starved of CPU (the shared machine at load
 * 15–22) read keepalive replies more than 24 s late and lost their leases at the local deadline.
 */
const ETCD_FOLLOWER_SESSION_MS = 60_000;
/** 10,000 ZooKeeper sessions and their listings in flight: room above the kit's default 256 MiB. */
const ZK_HEAP_MB = 1024;
const participantsFile = join(import.meta.dirname, 'fixtures', 'participants.ts');
const fixtures = join(import.meta.dirname, '..', 'test');
const ms = (ns: bigint): number => Number(ns) / 1e6;
let seq = 0;

interface Backend {
  label: string;
  /** The leader, in its own process; resolves once it leads. */
  leader(name: string): Promise<WorkerHandle>;
  /** A fresh election name. */
  name(): string;
  target: string | string[];
  /** Server watches now; `settled` waits for the last round's to go first. */
  watches(settled?: boolean): Promise<number>;
  /** Every waiter's watches are at the server. */
  queued(added: number, waiters: number): boolean;
  watchesPerWaiter: number;
  extra(): Promise<string | undefined>;
  /** Watches the leader of election `name` for its deletion (see LeaderGone). */
  gone(name: string): Promise<LeaderGone>;
}

interface Round {
  queueMs: number;
  /** Per worker: heap bytes per participant. */
  heapPerParticipant: number[];
  watchesPerParticipant: number;
  extra?: string;
  failoverMs: number;
  /** Of which: from the kill until the leader's key or node was deleted (the rest of its lease). */
  leaseRestMs: number;
  /** Of which: from that deletion until the next leader was elected. */
  afterDeletionMs: number;
  wakeUps: number;
  failed: number;
  firstError?: string;
  procs: number;
}

async function stopAll(workers: WorkerHandle[]): Promise<void> {
  // Closed, not killed: 10,000 sessions expiring together would load the server through the next round.
  for (const w of workers) w.send({ cmd: 'close' });
  await Promise.all(workers.map((w) => Promise.race([w.exited, sleep(60_000).then(() => w.kill())])));
}

/** n participants: the leader in its own process, n − 1 over the workers. */
async function round(b: Backend, n: number): Promise<Round> {
  const name = b.name();
  const leader = await b.leader(name);
  const workers: WorkerHandle[] = [];
  try {
    const followers = n - 1;
    const procs = Math.ceil(followers / PER_PROC);
    for (let p = 0; p < procs; p++) {
      const count = Math.min(PER_PROC, followers - p * PER_PROC);
      workers.push(await spawnWorker(participantsFile, [], { env: { PARTICIPANTS: JSON.stringify({ backend: b.label, target: b.target, name, n: count, sessionMs: b.label === 'etcd' ? ETCD_FOLLOWER_SESSION_MS : FOLLOWER_SESSION_MS, perClient: ETCD_PER_CLIENT, joinsInFlight: JOINS_IN_FLIGHT, ...(b.label === 'etcd' ? { callTimeoutMs: ETCD_CALL_TIMEOUT_MS } : {}), id: `w${p}` }) } }));
    }
    await Promise.all(workers.map((w) => w.waitFor('ready', { timeoutMs: 300_000 })));
    const watches0 = await b.watches(true);
    const failed = (): WorkerHandle['events'] => workers.flatMap((w) => w.events.filter((e) => e.type === 'campaign-failed'));
    const t0 = process.hrtime.bigint();
    for (const w of workers) w.send({ cmd: 'go' });
    let seen = 0;
    let lastRise = t0;
    await until(
      async () => {
        const added = (await b.watches()) - watches0;
        if (added > seen) [seen, lastRise] = [added, process.hrtime.bigint()];
        return b.queued(added, followers - failed().length) || (added >= 0.99 * b.watchesPerWaiter * (followers - failed().length) && ms(process.hrtime.bigint() - lastRise) > 2000);
      },
      `${b.watchesPerWaiter * followers} ${b.label} watches`,
      async () => `${(await b.watches()) - watches0} watches, ${failed().length} failed${failed()[0] ? ` (${String(failed()[0]!.data.error)})` : ''}`,
      QUEUE_TIMEOUT_MS,
    );
    const queueMs = ms(lastRise - t0);
    const watches = (await b.watches()) - watches0;
    const extra = await b.extra();
    const heaps = await Promise.all(
      workers.map(async (w) => {
        const from = w.events.length;
        w.send({ cmd: 'heap' });
        const e = await w.waitFor('heap', { from, timeoutMs: 60_000 });
        return Number(e.data.bytes) / Number(e.data.n);
      }),
    );
    const wakeUps = async (): Promise<number> => {
      const all = await Promise.all(
        workers.map(async (w) => {
          const from = w.events.length;
          w.send({ cmd: 'wakeups' });
          return Number((await w.waitFor('wakeups', { from, timeoutMs: 60_000 })).data.n);
        }),
      );
      return all.reduce((a, x) => a + x, 0);
    };
    const wake0 = await wakeUps();
    const lostBefore = failed().length;
    const gone = await b.gone(name);
    let times: ReturnType<typeof failoverParts>;
    try {
      const killed = process.hrtime.bigint();
      await leader.kill();
      const elected = (): bigint | undefined => workers.flatMap((w) => w.events.filter((e) => e.type === 'elected' && e.t > killed).map((e) => e.t)).sort((x, y) => (x < y ? -1 : 1))[0];
      await until(async () => elected() !== undefined && gone.at() !== undefined, "a new leader after the SIGKILL, and the old one's deletion seen", async () => `${failed().length} failed`, 60_000);
      times = failoverParts(killed, gone.at()!, elected()!);
    } finally {
      await gone.close();
    }
    await sleep(200); // any further (wrong) wake-up would land by now
    const woken = (await wakeUps()) - wake0;
    return { queueMs, heapPerParticipant: heaps, watchesPerParticipant: watches / followers, extra, ...times, wakeUps: woken, failed: lostBefore, firstError: failed()[0]?.data.error as string | undefined, procs };
  } finally {
    await leader.kill();
    await stopAll(workers);
  }
}

async function zkBackend(zk: ZooKeeperServer): Promise<Backend> {
  return {
    label: 'zk',
    target: zk.connectionString,
    name: () => `/scale10k/latch-${++seq}`,
    leader: async (path) => {
      const w = await spawnWorker(join(fixtures, 'zk', 'fixtures', 'worker.ts'), [zk.connectionString, 'latch', path, '0', '0', '-', String(LEADER_SESSION_MS)]);
      await w.waitFor('acquired');
      return w;
    },
    watches: () => zkTotalWatches(zk),
    // Each waiter watches its own node (set when it queued) and its predecessor.
    watchesPerWaiter: 2,
    queued: (added, waiters) => added >= 2 * waiters,
    extra: async () => `at most ${await zkMaxWatchesOnOnePath(zk)} watch(es) on one path`,
    gone: (path) => zkLeaderGone(zk.connectionString, path),
  };
}

async function etcdBackend(etcd: EtcdServer): Promise<Backend> {
  return {
    label: 'etcd',
    target: etcd.endpoints,
    name: () => `scale10k/election-${++seq}`,
    leader: async (name) => {
      const w = await spawnWorker(join(fixtures, 'etcd', 'fixtures', 'candidate.ts'), ['elect', etcd.endpoints.join(','), name, String(LEADER_SESSION_MS / 1000)], { env: { TENURE_OPTS: JSON.stringify({ once: true }) } });
      await w.waitFor('elected');
      return w;
    },
    watches: (settled) => (settled ? settledWatchers(etcd) : etcdWatchers(etcd)),
    // Each waiter watches its predecessor and its own key.
    watchesPerWaiter: 2,
    queued: (added, waiters) => added >= 2 * waiters,
    extra: async () => undefined,
    gone: async (name) => {
      const client = await createEtcdClient({ hosts: etcd.endpoints });
      const g = await etcdLeaderGone(client, `${name}/`).catch((e: unknown) => {
        client.close();
        throw e;
      });
      return {
        at: g.at,
        close: async () => {
          await g.close();
          client.close();
        },
      };
    },
  };
}

const kib = (b: number): string => (b / 1024).toFixed(1);

async function measure(group: string, b: Backend): Promise<BenchRow[]> {
  const small: Round[] = [];
  for (let i = 0; i < SMALL_ROUNDS; i++) small.push(await round(b, 2));
  const big = await round(b, N);
  const smallMs = percentile(small.map((r) => r.failoverMs), 50);
  const heaps = big.heapPerParticipant;
  const meanHeap = heaps.reduce((a, x) => a + x, 0) / heaps.length;
  return [
    {
      group,
      scenario: `${N} participants over ${big.procs} processes: all queued (first campaign → every waiter's watch on the server)`,
      impl: 'tenure',
      p50Ms: big.queueMs,
      notes: notes(
        `${kib(meanHeap)} KiB heap per participant (session + client + recipe; per process ${kib(Math.min(...heaps))}–${kib(Math.max(...heaps))})`,
        `${big.watchesPerParticipant.toFixed(2)} server watches per participant`,
        big.extra,
        big.failed > 0 && `${big.failed} campaign(s) failed (${big.firstError})`,
        `${JOINS_IN_FLIGHT} joins in flight per process`,
        'one round',
      ),
    },
    {
      group,
      scenario: `failover after SIGKILL of the leader's process, ${N} waiting`,
      impl: 'tenure',
      p50Ms: big.failoverMs,
      notes: notes(`${(big.failoverMs / smallMs).toFixed(2)}× the 2-participant figure`, deletionNote([big.afterDeletionMs], small.map((r) => r.afterDeletionMs)), `the rest of the leader's lease after the kill ${big.leaseRestMs.toFixed(0)} ms`, `${big.wakeUps} waiter(s) woken by the crash`, 'one round', `leader session ${LEADER_SESSION_MS} ms`),
    },
    { group, scenario: "failover after SIGKILL of the leader's process, 2 participants", impl: 'tenure', p50Ms: smallMs, notes: notes(`the rest of the leader's lease after the kill ${small.map((r) => r.leaseRestMs.toFixed(0)).join('/')} ms`, `median of ${SMALL_ROUNDS} rounds (ms ${small.map((r) => r.failoverMs.toFixed(0)).join('/')})`) },
  ];
}

async function run(): Promise<BenchRow[]> {
  const rows: BenchRow[] = [];
  const only = process.env.TENURE_SCALE_ONLY;
  const cases = [
    ['scale 10k: ZooKeeper LeaderLatch', 'zk'],
    ['scale 10k: etcd EtcdElection', 'etcd'],
  ] as const;
  for (const [group, which] of cases) {
    if (only && !group.includes(only) && which !== only) continue;
    // A fresh server per backend: the other's 10,000 sessions are not its load.
    const server = which === 'zk' ? await new ZooKeeperServer({ maxHeapMb: ZK_HEAP_MB }).start() : await new EtcdServer().start();
    try {
      const b = which === 'zk' ? await zkBackend(server as ZooKeeperServer) : await etcdBackend(server as EtcdServer);
      rows.push(...(await measure(group, b)));
    } catch (e) {
      // One backend's failure must not lose the other's figures.
      rows.push({ group, scenario: 'FAILED', impl: 'tenure', notes: String(e instanceof Error ? e.message : e).replace(/\|/g, '/').slice(0, 400) });
    } finally {
      await server.stop();
    }
  }
  return rows;
}

export const cases: BenchCase[] = [{ group: 'scale 10k', run }];
