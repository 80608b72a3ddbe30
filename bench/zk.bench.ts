/**
 * ZooKeeper lock benchmarks: tenure's InterProcessMutex (predecessor watch, protected creation,
 * ephemeralOwner check) side by side with a naive lock written here as the baseline: every waiter
 * sets a getChildren watch on the parent and re-reads the children on every change (the herd).
 * Cases: uncontended acquire+release, 10 contenders in one process on 10 sessions, handoff latency.
 */
import zookeeper, { type Client } from 'node-zookeeper-client';
import { percentile, timeLoop, type BenchCase, type BenchRow } from './harness.js';
import { ZooKeeperServer } from '../src/testing/index.js';
import { InterProcessMutex, ZkSession } from '../src/recipes/zk/index.js';

const GROUP = 'zk mutex';

/** The baseline: a getChildren-watch lock, the way it is often written by hand. */
class NaiveLock {
  wakeUps = 0;
  constructor(
    private readonly client: Client,
    private readonly path: string,
  ) {}

  async acquire(): Promise<string> {
    const node = await new Promise<string>((resolve, reject) =>
      this.client.create(`${this.path}/lock-`, Buffer.alloc(0), zookeeper.CreateMode.EPHEMERAL_SEQUENTIAL, (e, p) => (e ? reject(e) : resolve(p))),
    );
    const mine = node.slice(this.path.length + 1);
    for (;;) {
      let changed!: () => void;
      const fired = new Promise<void>((r) => (changed = r));
      const children = await new Promise<string[]>((resolve, reject) =>
        this.client.getChildren(
          this.path,
          () => {
            this.wakeUps++;
            changed();
          },
          (e, ch) => (e ? reject(e) : resolve(ch)),
        ),
      );
      if (children.sort()[0] === mine) return node;
      await fired;
    }
  }

  release(node: string): Promise<void> {
    return new Promise((resolve, reject) => this.client.remove(node, -1, (e) => (e ? reject(e) : resolve())));
  }
}

async function rawClient(conn: string, path: string): Promise<Client> {
  const c = zookeeper.createClient(conn, { sessionTimeout: 10_000, retries: 0 });
  await new Promise<void>((resolve) => {
    c.once('connected', () => resolve());
    c.connect();
  });
  await new Promise<void>((resolve) => c.mkdirp(path, () => resolve()));
  return c;
}

interface Contender {
  acquire(): Promise<() => Promise<void>>;
  wakeUps(): number;
  close(): Promise<void>;
}

async function tenureContender(conn: string, path: string): Promise<Contender> {
  const s = await ZkSession.create({ connectionString: conn, ttlMs: 10_000 });
  const m = new InterProcessMutex(s, path);
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

type Factory = (conn: string, path: string) => Promise<Contender>;
const IMPLS: [string, Factory, string][] = [
  ['tenure InterProcessMutex', tenureContender, '/bench/tenure'],
  ['naive getChildren-watch lock', naiveContender, '/bench/naive'],
];

async function uncontended(conn: string, durationMs: number): Promise<BenchRow[]> {
  const rows: BenchRow[] = [];
  for (const [impl, make, path] of IMPLS) {
    const c = await make(conn, `${path}/u`);
    for (let i = 0; i < 500; i++) await (await c.acquire())(); // warm up (JIT, parent node)
    const r = await timeLoop(async () => (await c.acquire())(), durationMs);
    rows.push({ group: GROUP, scenario: 'uncontended acquire+release', impl, opsPerSec: r.opsPerSec, p50Ms: r.p50Ms, p99Ms: r.p99Ms });
    await c.close();
  }
  return rows;
}

async function contended(conn: string, durationMs: number): Promise<BenchRow[]> {
  const rows: BenchRow[] = [];
  for (const [impl, make, path] of IMPLS) {
    const cs = await Promise.all(Array.from({ length: 10 }, () => make(conn, `${path}/c`)));
    await (await cs[0]!.acquire())();
    const waits: number[] = [];
    const perContender = cs.map(() => 0);
    let grants = 0;
    const wake0 = cs.reduce((n, c) => n + c.wakeUps(), 0);
    const end = performance.now() + durationMs;
    const start = performance.now();
    await Promise.all(
      cs.map(async (c, i) => {
        while (performance.now() < end) {
          const t = performance.now();
          const release = await c.acquire();
          waits.push(performance.now() - t);
          grants++;
          perContender[i]!++;
          await release();
        }
      }),
    );
    const secs = (performance.now() - start) / 1000;
    const wakeUps = cs.reduce((n, c) => n + c.wakeUps(), 0) - wake0;
    rows.push({
      group: GROUP,
      scenario: '10 contenders, 10 sessions, 1 process',
      impl,
      opsPerSec: grants / secs,
      p50Ms: percentile(waits, 50),
      p99Ms: percentile(waits, 99),
      notes: `wait latency; fairness min/max ${Math.min(...perContender)}/${Math.max(...perContender)}; watch wake-ups per grant ${(wakeUps / grants).toFixed(2)}`,
    });
    await Promise.all(cs.map((c) => c.close()));
  }
  return rows;
}

async function handoff(conn: string, durationMs: number): Promise<BenchRow[]> {
  const rows: BenchRow[] = [];
  for (const [impl, make, path] of IMPLS) {
    const [a, b] = await Promise.all([make(conn, `${path}/h`), make(conn, `${path}/h`)]);
    const lat: number[] = [];
    const end = performance.now() + durationMs;
    let holder = a;
    let waiter = b;
    let release = await holder.acquire();
    while (performance.now() < end) {
      const next = waiter.acquire();
      await new Promise((r) => setTimeout(r, 2)); // the waiter's node and watch are in place
      const t = performance.now();
      await Promise.all([release(), next.then(() => lat.push(performance.now() - t))]);
      release = await next;
      [holder, waiter] = [waiter, holder];
    }
    await release();
    rows.push({ group: GROUP, scenario: 'handoff: release → next holder granted', impl, p50Ms: percentile(lat, 50), p99Ms: percentile(lat, 99), notes: `${lat.length} handoffs` });
    await Promise.all([a.close(), b.close()]);
  }
  return rows;
}

export const cases: BenchCase[] = [
  {
    group: GROUP,
    async run({ durationMs }) {
      const zk = await new ZooKeeperServer().start();
      try {
        // Warm both implementations (and the client library's JIT) before measuring anything,
        // so the one measured first is not penalised.
        await uncontended(zk.connectionString, Math.min(2000, durationMs));
        return [...(await uncontended(zk.connectionString, durationMs)), ...(await contended(zk.connectionString, durationMs)), ...(await handoff(zk.connectionString, durationMs))];
      } finally {
        await zk.stop();
      }
    },
  },
];
