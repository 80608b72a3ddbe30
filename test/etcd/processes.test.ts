import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { EtcdServer, FaultProxy, spawnWorker, type WorkerEvent, type WorkerHandle } from '../../src/testing/index.js';
import { EXPIRY_SLACK_MS, Pool, TTL, uniqueName, until } from './helpers.js';
import { ms, overlap, terms } from './history.js';

const fixture = new URL('./fixtures/candidate.ts', import.meta.url).pathname;
let etcd: EtcdServer;
const pool = new Pool(() => etcd.endpoints);
const workers: WorkerHandle[] = [];
const proxies: FaultProxy[] = [];
let dir: string;

beforeAll(async () => {
  etcd = await new EtcdServer().start();
  dir = mkdtempSync(join(tmpdir(), 'tenure-etcd-'));
});
afterEach(async () => {
  await Promise.all(workers.splice(0).map((w) => w.kill()));
  await Promise.all(proxies.splice(0).map((p) => p.stop()));
  await pool.cleanup();
});
afterAll(async () => {
  await etcd?.stop();
  rmSync(dir, { recursive: true, force: true });
});

async function spawn(mode: string, name: string, endpoints: string[], opts: object = {}, ttl = TTL): Promise<WorkerHandle> {
  const w = await spawnWorker(fixture, [mode, endpoints.join(','), name, String(ttl)], { env: { TENURE_OPTS: JSON.stringify(opts) } });
  workers.push(w);
  return w;
}

async function queued(name: string, n: number): Promise<void> {
  await until(async () => (await pool.shared().getAll().prefix(`${name}/`).keys()).length >= n, 20_000, `${n} candidates queued`);
}

describe('etcd recipes across processes (single etcd)', () => {
  it('10 contender processes never overlap and are granted in FIFO order', async () => {
    const name = uniqueName('mx');
    const sentinel = join(dir, `${name.replace(/\//g, '_')}.held`);
    // A long TTL: this case is about order and exclusion, and ten processes starting at once on two
    // cores can starve a 2 s keepalive past its local deadline.
    const ws = await Promise.all(Array.from({ length: 10 }, () => spawn('mutex', name, etcd.endpoints, { rounds: 6, holdMs: 3, sentinel }, 10)));
    await Promise.all(ws.map((w) => w.waitFor('done', { timeoutMs: 90_000 })));
    const acquired = ws.flatMap((w) => w.events.filter((e) => e.type === 'acquired')) as WorkerEvent<Record<string, string>>[];
    expect(ws.flatMap((w) => w.events.filter((e) => e.type === 'overlap'))).toEqual([]);
    expect(acquired).toHaveLength(60);
    acquired.sort((a, b) => (a.t < b.t ? -1 : 1));
    for (let i = 1; i < acquired.length; i++) {
      // FIFO: grants in queue (create_revision) order; fences strictly increase.
      expect(BigInt(acquired[i]!.data.createRevision!)).toBeGreaterThan(BigInt(acquired[i - 1]!.data.createRevision!));
      expect(BigInt(acquired[i]!.data.fence!)).toBeGreaterThan(BigInt(acquired[i - 1]!.data.fence!));
    }
  });

  it("a SIGKILLed leader's lease frees the name within the TTL plus a small bound, not at once", async () => {
    const name = uniqueName('kill');
    const a = await spawn('elect', name, etcd.endpoints);
    await a.waitFor('elected');
    const b = await spawn('elect', name, etcd.endpoints);
    await queued(name, 2);
    const tKill = process.hrtime.bigint();
    await a.kill();
    const eb = await b.waitFor('elected', { timeoutMs: TTL * 1000 + 10_000 });
    const failover = ms(tKill, eb.t);
    console.log(`[etcd] SIGKILL failover at TTL ${TTL}s: ${failover.toFixed(0)} ms`);
    expect(failover).toBeGreaterThan((TTL * 1000 * 2) / 3 - 250);
    expect(failover).toBeLessThan(TTL * 1000 + EXPIRY_SLACK_MS);
  });

  it("a SIGSTOPped leader's signal had aborted (its local deadline passed) before the next leader was elected", async () => {
    const name = uniqueName('stop');
    const a = await spawn('elect', name, etcd.endpoints, { once: true });
    await a.waitFor('elected');
    const b = await spawn('elect', name, etcd.endpoints);
    await queued(name, 2);
    a.pause();
    const eb = await b.waitFor('elected', { timeoutMs: TTL * 1000 + 10_000 });
    a.resume();
    const lost = await a.waitFor<Record<string, string>>('lost', { timeoutMs: 10_000 });
    expect(['deadline', 'expired']).toContain(lost.data.reason);
    const margin = ms(BigInt(lost.data.deadlineNs!), eb.t);
    console.log(`[etcd] SIGSTOP: paused leader's deadline passed ${margin.toFixed(0)} ms before the next was elected`);
    expect(BigInt(lost.data.deadlineNs!)).toBeLessThan(eb.t);
    expect(overlap(terms([a, b]))).toBeUndefined();
  });

  it("a blackholed leader's signal aborts before another is elected (negative zombie window)", async () => {
    const name = uniqueName('bh');
    const proxy = await new FaultProxy({ target: { port: etcd.clientPort } }).start();
    proxies.push(proxy);
    const a = await spawn('elect', name, [`http://${proxy.address}`], { once: true });
    await a.waitFor('elected');
    const b = await spawn('elect', name, etcd.endpoints);
    await queued(name, 2);
    proxy.blackhole();
    const [lost, eb] = await Promise.all([a.waitFor<Record<string, string>>('lost', { timeoutMs: 20_000 }), b.waitFor('elected', { timeoutMs: 20_000 })]);
    const zombie = ms(eb.t, lost.t);
    console.log(`[etcd] blackhole zombie window at TTL ${TTL}s: ${zombie.toFixed(0)} ms (negative = old leader stopped first)`);
    expect(lost.data.reason).toBe('deadline');
    expect(zombie).toBeLessThan(0);
  });

  it('a 1 s link reset, shorter than the TTL, while the leader keeps making calls does not cost leadership', async () => {
    const name = uniqueName('blip');
    const ttl = 3;
    const proxy = await new FaultProxy({ target: { port: etcd.clientPort } }).start();
    proxies.push(proxy);
    const client = pool.client([`http://${proxy.address}`]);
    const { EtcdElection } = await import('../../src/recipes/etcd/election.js');
    const s = await pool.session({ client, ttlMs: ttl * 1000 });
    const term = await new EtcdElection(s, name, { id: 'a' }).campaign();
    const b = await spawn('elect', name, etcd.endpoints, {}, ttl);
    await queued(name, 2);
    let calls = 0;
    let stop = false;
    const app = (async () => {
      while (!stop) {
        await client.get(`${name}/x`).string().then(() => calls++, () => undefined);
        await new Promise((r) => setTimeout(r, 50));
      }
    })();
    // Every connection of the leader is reset for 1 s: its calls fail fast, again and again.
    const end = performance.now() + 1000;
    while (performance.now() < end) {
      proxy.cut();
      await new Promise((r) => setTimeout(r, 5));
    }
    const before = calls;
    await new Promise((r) => setTimeout(r, ttl * 1000 * 1.5));
    stop = true;
    await app;
    expect(term.signal.aborted).toBe(false);
    expect(calls).toBeGreaterThan(before);
    expect(b.events.some((e) => e.type === 'elected')).toBe(false);
    await term.proclaim('still here');
  });
});
