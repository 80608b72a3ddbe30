/**
 * etcd benchmarks: tenure's EtcdMutex / EtcdElection side by side with the `etcd3` package's own
 * Lock (a try-lock: spun here) and Election, on one real etcd (data on tmpfs), in the same run.
 * Plus two fault measurements per implementation: the zombie window under a partition, and
 * whether a 1 s link reset costs leadership.
 */
import { performance } from 'node:perf_hooks';
import { Etcd3, EtcdLockFailedError } from 'etcd3';
import { EtcdElection, EtcdMutex, EtcdSession, createEtcdClient } from '../src/recipes/etcd/index.js';
import { EtcdServer } from '../src/testing/index.js';
import { interleaved, notes, percentile, spread, timeLoop, type BenchCase, type BenchRow } from './harness.js';

const TTL = 2;
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
let seq = 0;
const unique = (base: string): string => `bench/${base}-${process.pid}-${++seq}`;

interface Contender {
  acquire(): Promise<void>;
  release(): Promise<void>;
  close(): Promise<void>;
}

/** 10 contenders cycling acquire → release for `durationMs`; wait, handoff and fairness figures. */
async function contended(make: (i: number) => Promise<Contender>, durationMs: number): Promise<Omit<BenchRow, 'group' | 'scenario' | 'impl'>> {
  const cs = await Promise.all(Array.from({ length: 10 }, (_, i) => make(i)));
  const waits: number[] = [];
  const handoffs: number[] = [];
  const counts = Array(10).fill(0) as number[];
  let releasedAt: number | undefined;
  const start = performance.now();
  const end = start + durationMs;
  await Promise.all(
    cs.map(async (c, i) => {
      while (performance.now() < end) {
        const t = performance.now();
        await c.acquire();
        const got = performance.now();
        waits.push(got - t);
        if (releasedAt !== undefined) handoffs.push(got - releasedAt);
        counts[i]!++;
        releasedAt = performance.now();
        await c.release();
      }
    }),
  );
  const elapsed = (performance.now() - start) / 1000;
  await Promise.all(cs.map((c) => c.close()));
  const total = counts.reduce((a, b) => a + b, 0);
  return {
    opsPerSec: total / elapsed,
    p50Ms: percentile(waits, 50),
    p99Ms: percentile(waits, 99),
    notes: `handoff p50/p99 ${percentile(handoffs, 50).toFixed(2)}/${percentile(handoffs, 99).toFixed(2)} ms; per contender min/max ${Math.min(...counts)}/${Math.max(...counts)}`,
  };
}

/** A tenure contender: its own client and session, and the recipe `open` makes on that session. */
function tenureContender(hosts: string[], open: (session: EtcdSession) => Omit<Contender, 'close'>): () => Promise<Contender> {
  return async () => {
    const client = await createEtcdClient({ hosts });
    const session = await EtcdSession.create({ client, ttlMs: TTL * 1000 });
    return {
      ...open(session),
      close: async () => {
        await session.close();
        client.close();
      },
    };
  };
}

function tenureMutexContender(hosts: string[], name: string): () => Promise<Contender> {
  return tenureContender(hosts, (session) => {
    const m = new EtcdMutex(session, name);
    let lease: Awaited<ReturnType<EtcdMutex['acquire']>> | undefined;
    return { acquire: async () => void (lease = await m.acquire()), release: () => lease!.release() };
  });
}

function etcd3LockContender(hosts: string[], name: string): () => Promise<Contender> {
  return async () => {
    const client = new Etcd3({ hosts });
    let lock: ReturnType<Etcd3['lock']> | undefined;
    return {
      acquire: async () => {
        for (;;) {
          lock = client.lock(name).ttl(TTL);
          try {
            await lock.acquire();
            return;
          } catch (e) {
            if (!(e instanceof EtcdLockFailedError)) throw e;
            await sleep(1);
          }
        }
      },
      release: () => lock!.release(),
      close: async () => client.close(),
    };
  };
}

function tenureElectionContender(hosts: string[], name: string): () => Promise<Contender> {
  return tenureContender(hosts, (session) => {
    const e = new EtcdElection(session, name);
    let term: Awaited<ReturnType<EtcdElection['campaign']>> | undefined;
    return { acquire: async () => void (term = await e.campaign()), release: () => term!.resign() };
  });
}

function etcd3ElectionContender(hosts: string[], name: string): () => Promise<Contender> {
  return async () => {
    const client = new Etcd3({ hosts });
    const election = client.election(name, TTL);
    let c: ReturnType<typeof election.campaign> | undefined;
    return {
      acquire: async () => {
        c = election.campaign('x');
        await c.wait();
      },
      release: () => c!.resign(),
      close: async () => client.close(),
    };
  };
}

async function uncontended(make: () => Promise<Contender>, durationMs: number): Promise<Omit<BenchRow, 'group' | 'scenario' | 'impl'>> {
  const c = await make();
  const r = await timeLoop(async () => {
    await c.acquire();
    await c.release();
  }, durationMs);
  await c.close();
  return { opsPerSec: r.opsPerSec, p50Ms: r.p50Ms, p99Ms: r.p99Ms };
}

async function withEtcd<T>(fn: (etcd: EtcdServer) => Promise<T>): Promise<T> {
  const etcd = await new EtcdServer().start();
  try {
    return await fn(etcd);
  } finally {
    await etcd.stop();
  }
}

const impls = (hosts: string[]) => ({
  mutex: [
    ['tenure EtcdMutex', (n: string) => tenureMutexContender(hosts, n)],
    ['etcd3 Lock (try + spin)', (n: string) => etcd3LockContender(hosts, n)],
  ] as const,
  election: [
    ['tenure EtcdElection', (n: string) => tenureElectionContender(hosts, n)],
    ['etcd3 Election', (n: string) => etcd3ElectionContender(hosts, n)],
  ] as const,
});

type Figures = Omit<BenchRow, 'group' | 'scenario' | 'impl'>;

function lockCase(kind: 'mutex' | 'election'): BenchCase {
  const group = `etcd ${kind}`;
  return {
    group,
    run: ({ durationMs }) =>
      withEtcd(async (etcd) => {
        const list = new Map<string, (n: string) => () => Promise<Contender>>(impls(etcd.endpoints)[kind]);
        const names = [...list.keys()];
        // Interleaved rounds: a noisy neighbour slows every implementation alike.
        const solo = await interleaved(names, (impl) => uncontended(list.get(impl)!(unique(kind)), durationMs), (r) => r.opsPerSec ?? 0);
        const ten = await interleaved(names, (impl) => {
          const name = unique(kind);
          return contended(() => list.get(impl)!(name)(), durationMs);
        }, (r) => r.opsPerSec ?? 0);
        const row = (scenario: string, impl: string, r: { median: Figures; keys: number[] }): BenchRow => ({ group, scenario, impl, ...r.median, notes: notes(r.median.notes, spread(r.keys, 'ops/s')) });
        return [...names.map((impl) => row('uncontended acquire+release', impl, solo.get(impl)!)), ...names.map((impl) => row('10 contenders (wait ms)', impl, ten.get(impl)!))];
      }),
  };
}

export const cases: BenchCase[] = [lockCase('mutex'), lockCase('election')];


const faultCase: BenchCase = {
  group: 'etcd faults',
  run: () =>
    withEtcd(async (etcd) => {
      const { pairs, zombieWindow, survivesLinkReset } = await import('./etcd-faults.js');
      const rows: BenchRow[] = [];
      const runs = 3;
      for (const [impl, make] of pairs) {
        const z: string[] = [];
        for (let i = 0; i < runs; i++) {
          const r = await zombieWindow(etcd, make, TTL);
          z.push(r.zombieMs === undefined ? 'never noticed (>20 s)' : `${r.zombieMs >= 0 ? '+' : ''}${r.zombieMs.toFixed(0)} ms`);
        }
        rows.push({ group: 'etcd faults', scenario: `zombie window, leader blackholed (TTL ${TTL} s)`, impl, notes: `${z.join(', ')} (negative = old leader stopped before the new one was elected)` });
      }
      for (const [impl, make] of pairs) {
        let kept = 0;
        for (let i = 0; i < runs; i++) if (await survivesLinkReset(etcd, make, 3)) kept++;
        rows.push({ group: 'etcd faults', scenario: '1 s link reset while calling (TTL 3 s)', impl, notes: `kept leadership in ${kept} of ${runs} runs` });
      }
      return rows;
    }),
};
cases.push(faultCase);
