/**
 * tenure's etcd recipes beside Go's `concurrency` package, as Debian's `etcdctl lock` / `etcdctl
 * elect` run it. Every participant is its own process (etcdctl is one), so tenure's run in worker
 * processes too (test/etcd/fixtures/candidate.ts):
 * - hand-off: the holder is told to release (etcdctl: SIGINT; tenure: an IPC message) → the
 *   queued waiter in another process is granted;
 * - failover: the holder is SIGKILLed → the waiter is granted once the holder's lease (TTL 2 s)
 *   expires. `etcdctl elect` has no --ttl in 3.4 (Go's default session TTL, 60 s), so crash
 *   failover is measured on the lock only.
 * Grant times: etcdctl's when its line reaches this process, tenure's stamped in the worker
 * (CLOCK_MONOTONIC both; the line's pipe trip, ~0.1 ms, is on etcdctl's side). tenure's two
 * workers take turns and stay warm; each etcdctl exits after its turn, so every etcdctl waiter is
 * a fresh process (Go: no JIT to warm; a fresh Node process pays ~100 ms of first-use costs).
 */
import { join } from 'node:path';
import type { Etcd3 } from 'etcd3';
import { EtcdServer, spawnWorker, type WorkerHandle } from '../src/testing/index.js';
import { createEtcdClient } from '../src/recipes/etcd/index.js';
import { etcdctlElect, etcdctlLock } from '../test/peers/etcdctl.js';
import type { LineProcess } from '../test/peers/line-process.js';
import { interleaved, notes, percentile, spread, type BenchCase, type BenchRow } from './harness.js';

const TTL = 2;
const SAMPLES = 5;
const candidate = join(import.meta.dirname, '..', 'test', 'etcd', 'fixtures', 'candidate.ts');
let seq = 0;

/** A participant that holds (or waits for) one name until told to let go. */
interface Participant {
  /** hrtime (ns) of its next grant. */
  granted(): Promise<bigint>;
  /** Queues again by itself after letting go (a warm process: tenure's workers; etcdctl exits). */
  readonly requeues: boolean;
  /** Tells it to release / resign. */
  letGo(): void;
  kill(): Promise<unknown>;
}
type Spawn = (endpoints: string[], name: string) => Participant;

function etcdctlParticipant(p: LineProcess, name: string, grantedLine: (text: string) => boolean): Participant {
  return {
    requeues: false,
    granted: async () => (await p.waitForLine(grantedLine, 30_000)).at,
    letGo: () => void p.signal('SIGINT'),
    kill: () => p.kill(),
  };
}

const spawns: Record<'lock' | 'elect', Record<string, Spawn>> = {
  lock: {
    'tenure EtcdMutex': (endpoints, name) => tenureParticipant(spawnWorker(candidate, ['hold', endpoints.join(','), name, String(TTL)]), 'acquired', 'release'),
    'etcdctl lock (Go concurrency.Mutex)': (endpoints, name) => {
      const p = etcdctlLock(endpoints, name, TTL);
      return etcdctlParticipant(p, name, (l) => l.startsWith(`${name}/`));
    },
  },
  elect: {
    'tenure EtcdElection': (endpoints, name) => tenureParticipant(spawnWorker(candidate, ['elect', endpoints.join(','), name, String(TTL)]), 'elected', 'resign'),
    'etcdctl elect (Go concurrency.Election)': (endpoints, name) => {
      const p = etcdctlElect(endpoints, name, 'proposal');
      return etcdctlParticipant(p, name, (l) => l === 'proposal');
    },
  },
};

function tenureParticipant(worker: Promise<WorkerHandle>, grantedEvent: string, cmd: string): Participant {
  let from = 0;
  return {
    requeues: true,
    granted: async () => {
      const w = await worker;
      const e = await w.waitFor(grantedEvent, { timeoutMs: 30_000, from });
      from = w.events.indexOf(e) + 1;
      return e.t;
    },
    letGo: () => void worker.then((w) => w.send({ cmd })),
    kill: async () => (await worker).kill(),
  };
}

async function keyCount(client: Etcd3, name: string): Promise<number> {
  return (await client.getAll().prefix(`${name}/`).keys()).length;
}

async function waitForKeys(client: Etcd3, name: string, n: number): Promise<void> {
  for (let i = 0; i < 3000; i++) {
    if ((await keyCount(client, name)) >= n) return;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error(`${name}: ${n} participants never queued`);
}

/**
 * `SAMPLES` hand-offs (or, with `crash`, failovers) in a chain: the holder lets go (or is
 * SIGKILLed) while the next one waits. Returns the median ms of the round.
 */
async function chain(client: Etcd3, endpoints: string[], spawn: Spawn, crash: boolean): Promise<number> {
  const name = `bench/peers-${process.pid}-${++seq}`;
  const all: Participant[] = [];
  const samples: number[] = [];
  try {
    let holder = spawn(endpoints, name);
    all.push(holder);
    await holder.granted();
    let waiter: Participant | undefined;
    for (let i = 0; i < SAMPLES; i++) {
      // A participant that re-queues is reused (both processes stay warm); others are replaced.
      if (!waiter) {
        waiter = spawn(endpoints, name);
        all.push(waiter);
      }
      await waitForKeys(client, name, 2);
      const t0 = process.hrtime.bigint();
      if (crash) void holder.kill();
      else holder.letGo();
      samples.push(Number((await waiter.granted()) - t0) / 1e6);
      const next = !crash && holder.requeues ? holder : undefined;
      if (!next) await holder.kill();
      [holder, waiter] = [waiter, next];
    }
  } finally {
    await Promise.all(all.map((p) => p.kill()));
  }
  return percentile(samples, 50);
}

async function run(): Promise<BenchRow[]> {
  const etcd = await new EtcdServer().start();
  const client = await createEtcdClient({ hosts: etcd.endpoints });
  const rows: BenchRow[] = [];
  try {
    for (const [kind, scenario, crash] of [
      ['lock', 'hand-off between processes: holder unlocks → waiter granted', false],
      ['elect', 'hand-off between processes: leader resigns → next elected', false],
      ['lock', `failover: holder SIGKILLed → waiter granted (TTL ${TTL} s)`, true],
    ] as const) {
      const impls = spawns[kind];
      const r = await interleaved(Object.keys(impls), (impl) => chain(client, etcd.endpoints, impls[impl]!, crash), (ms) => ms, { rounds: 3, warmup: 0 });
      for (const [impl, { median, keys }] of r) rows.push({ group: 'etcd peers', scenario, impl, p50Ms: median, notes: notes(`median of ${SAMPLES} per round`, spread(keys, 'ms')) });
    }
  } finally {
    client.close();
    await etcd.stop();
  }
  return rows;
}

export const cases: BenchCase[] = [{ group: 'etcd peers', run }];
