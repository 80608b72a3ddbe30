import { afterAll, beforeAll, expect, it } from 'vitest';
import { EtcdServer, FaultProxy, spawnWorker, type WorkerEvent, type WorkerHandle } from '../../src/testing/index.js';

/**
 * `@Leader()` across processes (issue 11): three processes run the same decorated service on a
 * real etcd, each through its own fault proxy. The leader is blackholed (its term ends at its
 * local deadline), then the next one is SIGTERMed (it resigns), then the last one is SIGKILLed.
 * From the events every call reported with the shared monotonic clock: a decorated method body
 * runs in at most one process at a time — a call's body counts until its signal aborts (or it
 * returns, or its process is killed) — and a demoted process's in-flight call saw its signal
 * abort before another process's call started.
 */
const fixture = new URL('./fixtures/leader-service.ts', import.meta.url).pathname;
const TTL_MS = 2000;
let etcd: EtcdServer;
beforeAll(async () => {
  etcd = await new EtcdServer().start();
});
afterAll(async () => {
  await etcd?.stop();
});

type Call = { pid: number; n: number; fence: bigint; enter: bigint; end: bigint | undefined };

/** Every call of every worker, its body's end being its abort, its exit or its process's kill. */
function calls(workers: WorkerHandle[], killed: Map<number, bigint>): Call[] {
  const out: Call[] = [];
  for (const w of workers) {
    const byN = new Map<number, Call>();
    for (const e of w.events as WorkerEvent<{ n: number; fence: string }>[]) {
      if (e.type === 'enter') byN.set(e.data.n, { pid: w.pid, n: e.data.n, fence: BigInt(e.data.fence), enter: e.t, end: undefined });
      else if (e.type === 'abort' || e.type === 'exit') {
        const c = byN.get(e.data.n);
        if (c && c.end === undefined) c.end = e.t;
      }
    }
    for (const c of byN.values()) out.push({ ...c, end: c.end ?? killed.get(w.pid) });
  }
  return out.sort((a, b) => (a.enter < b.enter ? -1 : 1));
}

it('three processes, one decorated service: the method body runs in at most one process at a time, and a demoted call sees its signal abort before another process starts one', async () => {
  const name = `sentinel-${process.pid}`;
  const proxies = await Promise.all([0, 1, 2].map(() => new FaultProxy({ target: { port: etcd.clientPort } }).start()));
  const workers = await Promise.all(proxies.map((p, i) => spawnWorker(fixture, [], { env: { PLAN: JSON.stringify({ endpoint: p.address, name, id: `p${i}`, ttlMs: TTL_MS }) } })));
  const killed = new Map<number, bigint>();
  const leaderOf = async (not: Set<number>): Promise<WorkerHandle> => {
    const all = workers.filter((w) => !not.has(w.pid));
    return Promise.race(all.map((w) => w.waitFor('enter', { timeoutMs: 30_000 }).then(() => w)));
  };
  try {
    const a = await leaderOf(new Set());
    await a.waitFor((e) => e.type === 'exit', { timeoutMs: 10_000 }); // a few calls in
    // 1. a is blackholed: its term ends at its local deadline, before etcd lets another win.
    proxies[workers.indexOf(a)]!.blackhole();
    const b = await leaderOf(new Set([a.pid]));
    await b.waitFor('exit', { timeoutMs: 10_000 });
    // 2. b is SIGTERMed: it resigns, its in-flight call aborts and drains, then c leads.
    const c = await (async () => {
      const rest = new Set([a.pid, b.pid]);
      const next = leaderOf(rest);
      await b.stop(10_000);
      return next;
    })();
    await c.waitFor('exit', { timeoutMs: 10_000 });
    // 3. a's link heals; c is SIGKILLed: a leads again after c's lease expires.
    proxies[workers.indexOf(a)]!.heal();
    const from = a.events.length;
    killed.set(c.pid, process.hrtime.bigint());
    await c.kill();
    await a.waitFor('enter', { timeoutMs: 30_000, from });
    await a.waitFor('exit', { timeoutMs: 10_000, from });

    const all = calls(workers, killed);
    expect(new Set(all.map((x) => x.pid)).size).toBe(3);
    // Sentinel: no call of one process starts before a call of another has ended.
    for (let i = 1; i < all.length; i++) {
      for (let j = 0; j < i; j++) {
        if (all[j]!.pid === all[i]!.pid) continue;
        expect(all[j]!.end, `call ${all[j]!.n} of ${all[j]!.pid} never ended`).toBeDefined();
        expect(all[j]!.end! < all[i]!.enter, `call ${all[i]!.n} of ${all[i]!.pid} started before call ${all[j]!.n} of ${all[j]!.pid} ended`).toBe(true);
      }
    }
    // The blackholed leader's in-flight call saw its signal abort before b's first call.
    const aborted = a.events.find((e) => e.type === 'abort');
    const bFirst = b.events.find((e) => e.type === 'enter')!;
    expect(aborted, 'the blackholed leader had a call in flight whose signal aborted').toBeDefined();
    expect(aborted!.t < bFirst.t).toBe(true);
    console.log(`[leader] blackholed call aborted ${(Number(bFirst.t - aborted!.t) / 1e6).toFixed(0)} ms before the next process's first call`);
    // Fences only go up from one process's calls to the next's.
    const fences = all.map((x) => x.fence);
    for (let i = 1; i < fences.length; i++) expect(fences[i]! >= fences[i - 1]!).toBe(true);
  } finally {
    await Promise.all(workers.map((w) => w.kill()));
    await Promise.all(proxies.map((p) => p.stop()));
  }
}, 90_000);
