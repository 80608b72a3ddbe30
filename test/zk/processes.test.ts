import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawnWorker, ZooKeeperEnsemble, ZooKeeperServer, type WorkerEvent, type WorkerHandle } from '../../src/testing/index.js';

const WORKER = new URL('./fixtures/worker.ts', import.meta.url).pathname;
let zk: ZooKeeperServer;
let sentinel: string;
const workers: WorkerHandle[] = [];

beforeAll(async () => {
  zk = await new ZooKeeperServer().start();
  sentinel = mkdtempSync(join(tmpdir(), 'tenure-zk-sentinel-'));
});
afterAll(async () => {
  await Promise.all(workers.map((w) => w.stop(500)));
  await zk?.stop();
  rmSync(sentinel, { recursive: true, force: true });
});

async function spawn(recipe: string, path: string, holdMs: number, cycles: number, extra: string[] = [], conn = zk.connectionString): Promise<WorkerHandle> {
  const w = await spawnWorker(WORKER, [conn, recipe, path, String(holdMs), String(cycles), sentinel, ...extra]);
  workers.push(w);
  return w;
}

interface Interval {
  pid: number;
  from: bigint;
  to: bigint;
  fence: bigint;
}

/** Pairs each worker's acquired/released events into holding intervals. */
function intervals(ws: WorkerHandle[]): Interval[] {
  const out: Interval[] = [];
  for (const w of ws) {
    let open: WorkerEvent | undefined;
    for (const e of w.events) {
      if (e.type === 'acquired') open = e;
      if (e.type === 'released' && open) {
        out.push({ pid: w.pid, from: open.t, to: e.t, fence: BigInt(String(open.data.fence)) });
        open = undefined;
      }
    }
  }
  return out.sort((a, b) => (a.from < b.from ? -1 : 1));
}

/** The most intervals that overlap at any instant. */
function maxConcurrent(iv: Interval[]): number {
  const points = iv.flatMap((i) => [{ t: i.from, d: 1 }, { t: i.to, d: -1 }]).sort((a, b) => (a.t === b.t ? a.d - b.d : a.t < b.t ? -1 : 1));
  let n = 0;
  let max = 0;
  for (const p of points) max = Math.max(max, (n += p.d));
  return max;
}

const violations = (ws: WorkerHandle[]): WorkerEvent[] => ws.flatMap((w) => w.events.filter((e) => e.type === 'violation'));

describe('ZooKeeper recipes across processes', () => {
  it('10 contending processes never hold the mutex together and are served in FIFO (fence) order', async () => {
    const ws = await Promise.all(Array.from({ length: 10 }, () => spawn('mutex', '/proc/mutex', 15, 3)));
    await Promise.all(ws.map((w) => w.waitFor('done', { timeoutMs: 90_000 })));
    const iv = intervals(ws);
    expect(iv).toHaveLength(30);
    expect(violations(ws)).toEqual([]);
    expect(maxConcurrent(iv)).toBe(1);
    for (let i = 1; i < iv.length; i++) expect(iv[i]!.fence > iv[i - 1]!.fence, `grant ${i} out of queue order`).toBe(true);
  });

  it('on a 3-member ensemble too, 10 processes never hold the mutex together and are served in FIFO order', async () => {
    const ens = await new ZooKeeperEnsemble().start();
    try {
      const ws = await Promise.all(Array.from({ length: 10 }, () => spawn('mutex', '/proc/ens-mutex', 10, 2, [], ens.connectionString)));
      await Promise.all(ws.map((w) => w.waitFor('done', { timeoutMs: 90_000 })));
      const iv = intervals(ws);
      expect(iv).toHaveLength(20);
      expect(violations(ws)).toEqual([]);
      expect(maxConcurrent(iv)).toBe(1);
      for (let i = 1; i < iv.length; i++) expect(iv[i]!.fence > iv[i - 1]!.fence, `grant ${i} out of queue order`).toBe(true);
    } finally {
      await ens.stop();
    }
  });

  it('a semaphore of 3 leases never has more than 3 holders across 8 processes', async () => {
    const ws = await Promise.all(Array.from({ length: 8 }, () => spawn('semaphore:3', '/proc/sem', 30, 3)));
    await Promise.all(ws.map((w) => w.waitFor('done', { timeoutMs: 90_000 })));
    const iv = intervals(ws);
    expect(iv).toHaveLength(24);
    expect(maxConcurrent(iv)).toBeLessThanOrEqual(3);
    expect(maxConcurrent(iv)).toBeGreaterThan(1);
  });

  it('the read/write lock never lets a writer overlap a reader or another writer', async () => {
    const readers = await Promise.all(Array.from({ length: 4 }, () => spawn('read', '/proc/rw', 30, 3)));
    const writers = await Promise.all(Array.from({ length: 3 }, () => spawn('write', '/proc/rw', 15, 3)));
    await Promise.all([...readers, ...writers].map((w) => w.waitFor('done', { timeoutMs: 90_000 })));
    const r = intervals(readers);
    const w = intervals(writers);
    expect(r).toHaveLength(12);
    expect(w).toHaveLength(9);
    expect(violations(writers)).toEqual([]);
    for (const x of w) {
      for (const y of [...r, ...w]) {
        if (x === y) continue;
        const overlap = x.from < y.to && y.from < x.to;
        expect(overlap, `writer ${x.pid} overlaps ${y.pid}`).toBe(false);
      }
    }
  });

  it('a SIGKILLed holder frees the lock within the session timeout plus a small bound', async () => {
    const a = await spawn('mutex', '/proc/kill', 60_000, 1, ['2000']);
    await a.waitFor('acquired');
    const b = await spawn('mutex', '/proc/kill', 10, 1, ['2000']);
    await b.waitFor('queued');
    await new Promise((r) => setTimeout(r, 300)); // b is waiting on a's node
    const killedAt = process.hrtime.bigint();
    await a.kill();
    const got = await b.waitFor('acquired', { timeoutMs: 20_000 });
    const ms = Number(got.t - killedAt) / 1e6;
    expect(ms).toBeLessThan(2000 + 1500);
    console.log(`handoff after SIGKILL: ${ms.toFixed(0)} ms (session timeout 2000 ms)`);
  });

  it("a SIGSTOPped holder's lease has ended (local deadline) before the next holder is granted", async () => {
    const a = await spawn('mutex', '/proc/stop', 60_000, 1, ['2000']);
    await a.waitFor('work');
    const b = await spawn('mutex', '/proc/stop', 10, 1, ['2000']);
    await b.waitFor('queued');
    await new Promise((r) => setTimeout(r, 300));
    a.pause();
    const granted = await b.waitFor('acquired', { timeoutMs: 20_000 });
    a.resume();
    const lost = await a.waitFor<{ reason: string; deadlineNs: string }>('lost', { timeoutMs: 10_000 });
    await a.waitFor('released', { timeoutMs: 10_000 });
    expect(BigInt(lost.data.deadlineNs) < granted.t, 'the local deadline precedes the next grant').toBe(true);
    console.log(`SIGSTOP: local deadline ${(Number(granted.t - BigInt(lost.data.deadlineNs)) / 1e6).toFixed(0)} ms before the next grant (reason ${lost.data.reason})`);
    const lateWork = a.events.filter((e) => e.type === 'work' && e.t > granted.t);
    expect(lateWork).toEqual([]);
  });
});
