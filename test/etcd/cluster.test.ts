import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { EtcdCluster, spawnWorker, type WorkerEvent, type WorkerHandle } from '../../src/testing/index.js';
import { Pool, TTL, uniqueName, until } from './helpers.js';
import { overlap, terms } from './history.js';

const fixture = new URL('./fixtures/candidate.ts', import.meta.url).pathname;
let cluster: EtcdCluster;
const pool = new Pool(() => cluster.endpoints);
const workers: WorkerHandle[] = [];
let dir: string;

beforeAll(async () => {
  cluster = await new EtcdCluster().start();
  await cluster.waitForLeader();
  dir = mkdtempSync(join(tmpdir(), 'tenure-etcd-cluster-'));
});
afterEach(async () => {
  await Promise.all(workers.splice(0).map((w) => w.kill()));
  await pool.cleanup();
  // Every member back up for the next test.
  for (const m of cluster.members) if (!m.running) await m.restart();
  await cluster.waitForLeader();
});
afterAll(async () => {
  await cluster?.stop();
  rmSync(dir, { recursive: true, force: true });
});

async function spawn(mode: string, name: string, opts: object = {}, ttl = TTL): Promise<WorkerHandle> {
  const w = await spawnWorker(fixture, [mode, cluster.endpoints.join(','), name, String(ttl)], { env: { TENURE_OPTS: JSON.stringify(opts) } });
  workers.push(w);
  return w;
}

async function queued(name: string, n: number): Promise<void> {
  await until(async () => (await pool.shared().getAll().prefix(`${name}/`).keys()).length >= n, 20_000, `${n} candidates queued`);
}

/** Workers currently leading (their last election event is 'elected'). */
function leading(ws: WorkerHandle[]): WorkerHandle[] {
  return ws.filter((w) => {
    const last = [...w.events].reverse().find((e) => ['elected', 'lost', 'resigned'].includes(e.type));
    return last?.type === 'elected';
  });
}

function electedCount(ws: WorkerHandle[]): number {
  return ws.reduce((n, w) => n + w.events.filter((e) => e.type === 'elected').length, 0);
}

describe('etcd recipes on a 3-member cluster', () => {
  it('10 contender processes never overlap and are granted in FIFO order', async () => {
    const name = uniqueName('mx');
    const sentinel = join(dir, `${name.replace(/\//g, '_')}.held`);
    // A long TTL: this case is about order and exclusion, and ten processes starting at once on two
    // cores can starve a 2 s keepalive past its local deadline.
    const ws = await Promise.all(Array.from({ length: 10 }, () => spawn('mutex', name, { rounds: 4, holdMs: 3, sentinel }, 10)));
    await Promise.all(ws.map((w) => w.waitFor('done', { timeoutMs: 90_000 })));
    const acquired = ws.flatMap((w) => w.events.filter((e) => e.type === 'acquired')) as WorkerEvent<Record<string, string>>[];
    expect(ws.flatMap((w) => w.events.filter((e) => e.type === 'overlap'))).toEqual([]);
    expect(acquired).toHaveLength(40);
    acquired.sort((a, b) => (a.t < b.t ? -1 : 1));
    for (let i = 1; i < acquired.length; i++) {
      expect(BigInt(acquired[i]!.data.createRevision!)).toBeGreaterThan(BigInt(acquired[i - 1]!.data.createRevision!));
    }
  });

  it('killing the raft leader member during a term and during a campaign leaves one leader at a time and the election going on', async () => {
    const name = uniqueName('raft');
    const ws = [await spawn('elect', name)];
    await ws[0]!.waitFor('elected');
    ws.push(await spawn('elect', name), await spawn('elect', name));
    await queued(name, 3);
    // During a term.
    const l1 = await cluster.waitForLeader();
    await l1.kill();
    await cluster.waitForLeader();
    await new Promise((r) => setTimeout(r, TTL * 1000));
    await l1.restart();
    await cluster.waitForLeader();
    // During a campaign: the leader resigns and the raft leader dies while the next one claims.
    const before = electedCount(ws);
    await until(() => leading(ws).length === 1, 20_000, 'a leader').catch((e: unknown) => {
      // Seen once in a full-suite run (not alone): what each worker went through, for the next look.
      for (const w of ws) console.log(w.pid, w.events.map((x) => `${x.type} ${JSON.stringify(x.data)}`).join('\n'), w.output());
      throw e;
    });
    const l2 = await cluster.waitForLeader();
    leading(ws)[0]!.send({ cmd: 'resign' });
    await l2.kill();
    await until(() => electedCount(ws) > before, 20_000, 'a new term after the raft leader died');
    await until(() => leading(ws).length === 1, 20_000, 'one leader').catch((e: unknown) => {
      for (const w of ws) console.log(w.pid, w.events.map((x) => `${x.type} ${JSON.stringify(x.data)}`).join('\n'), w.output());
      throw e;
    });
    const ts = terms(ws);
    if (overlap(ts)) console.log(ts);
    expect(overlap(ts)).toBeUndefined();
    expect(ts.length).toBeGreaterThanOrEqual(2);
  });

  it("a watch served by a member that lags behind never takes the deletion of a name's earlier key for a deletion of the current one", async () => {
    const { waitDeleted, watchOwn } = await import('../../src/recipes/etcd/watch.js');
    const { silentLogger } = await import('../../src/core/options.js');
    const leader = await cluster.waitForLeader();
    const lagging = cluster.members.find((m) => m !== leader)!;
    const writer = pool.client([leader.endpoint]);
    // Every watch of these clients is served by the lagging member (one client per watch: a
    // client attaches its watches one at a time, and both must be asked for while it lags).
    const [ownClient, predClient] = [pool.client([lagging.endpoint]), pool.client([lagging.endpoint])];
    const txn = (req: Parameters<typeof writer.kv.txn>[0]) => writer.kv.txn(req);
    const key = Buffer.from(uniqueName('lag'));
    await writer.put(key).value('first');
    // The watch streams are up before the member stops, so later watch requests sit in its socket.
    const warm = [ownClient, predClient].map((c) => c.watch().key(`${key.toString()}-warm`).watcher());
    await Promise.all(warm.map((w) => new Promise((r) => w.once('connected', r))));
    const ac = new AbortController();
    let own: ReturnType<typeof watchOwn> | undefined;
    try {
      await lagging.pause();
      await writer.delete().key(key); // committed by the other two members: the lagging one applies it later
      const put = await writer.kv.put({ key, value: Buffer.from('second') });
      const rev = BigInt(put.header.revision);
      own = watchOwn(ownClient, txn, key, rev, ac.signal, 'lag test', silentLogger());
      let predGone = false;
      const pred = waitDeleted(predClient, txn, { key, create_revision: String(rev) } as never, ac.signal, silentLogger()).then(() => (predGone = true));
      await new Promise((r) => setTimeout(r, 100)); // both watch requests written to the stopped member
      await lagging.resume();
      // The member creates the watches at the revision it has applied (before the deletion), then
      // catches up: once it serves the current key, any replayed deletion has been delivered.
      await until(async () => (await ownClient.get(key.toString()).serializable(true).string()) === 'second', 20_000, 'the lagging member catches up');
      await new Promise((r) => setTimeout(r, 300));
      expect(own.gone.aborted).toBe(false);
      expect(predGone).toBe(false);
      // The current key's own deletion is seen by both.
      await writer.delete().key(key);
      await until(() => own!.gone.aborted && predGone, 20_000, 'the deletion of the current key seen');
      await pred;
    } finally {
      if (lagging.paused) await lagging.resume();
      own?.stop();
      ac.abort();
      await Promise.all(warm.map((w) => w.cancel().catch(() => undefined)));
    }
  });

  it('observe keeps reporting leader changes across the death of a member', async () => {
    const { EtcdElection } = await import('../../src/recipes/etcd/election.js');
    const name = uniqueName('obs');
    // A 6 s TTL: this case is about observe() riding a member's death, and a 2 s lease can miss its
    // local deadline while the client reconnects and raft elects a new leader on a loaded machine.
    const session = () => pool.session({ client: pool.client(cluster.endpoints), ttlMs: 6000 });
    const observer = new EtcdElection(await session(), name);
    const ac = new AbortController();
    const seen: string[] = [];
    const loop = (async () => {
      for await (const l of observer.observe({ signal: ac.signal })) if (l) seen.push(l.id);
    })().catch(() => undefined);
    const a = new EtcdElection(await session(), name, { id: 'a' });
    const ta = await a.campaign();
    await until(() => seen.includes('a'), 10_000, 'observer sees a');
    const dead = await cluster.waitForLeader();
    await dead.kill();
    await ta.proclaim('a2');
    await until(() => seen.includes('a2'), 15_000, 'observer sees the proclaim after a member died');
    const b = new EtcdElection(await session(), name, { id: 'b' });
    const pb = b.campaign();
    await ta.resign();
    const tb = await pb;
    await until(() => seen.includes('b'), 15_000, 'observer sees b');
    ac.abort();
    await loop;
    expect(seen).toEqual(['a', 'a2', 'b']);
    await tb.resign();
  });

  it('restarting the whole cluster never yields two leaders', async () => {
    const name = uniqueName('restart');
    const ws = [await spawn('elect', name), await spawn('elect', name), await spawn('elect', name)];
    await until(() => leading(ws).length === 1, 20_000, 'a leader');
    await queued(name, 3);
    await cluster.restart({ hard: true });
    await cluster.waitForLeader();
    // Let every old lease either survive or expire, and the queue settle.
    await new Promise((r) => setTimeout(r, TTL * 1000 * 3));
    await until(() => leading(ws).length === 1, 20_000, 'a leader after the restart');
    await new Promise((r) => setTimeout(r, 1000));
    expect(leading(ws)).toHaveLength(1);
    expect(overlap(terms(ws))).toBeUndefined();
  });
});
