import { describe, expect, it } from 'vitest';
import { ClientClosedError, type IKeyValue } from 'etcd3';
import { FaultProxy } from '../../src/testing/index.js';
import { httpRequest } from '../../src/testing/net.js';
import { EtcdMutex } from '../../src/recipes/etcd/mutex.js';
import { watchKey, watchStreamStats, type KeyWatch } from '../../src/recipes/etcd/watch-stream.js';
import { readKey, waitDeleted } from '../../src/recipes/etcd/watch.js';
import { silentLogger } from '../../src/core/options.js';
import { etcdForFile, serverCalls, uniqueName, until, type Pool } from './helpers.js';

const { server, pool } = etcdForFile();

const silent = silentLogger();

async function serverWatchers(): Promise<number> {
  const { body } = await httpRequest(server().clientPort, '/metrics', { timeoutMs: 5000 });
  return Number(/^etcd_debugging_mvcc_watcher_total (\d+)/m.exec(body)?.[1] ?? NaN);
}

/** Watches `key` for deletions, collecting them. */
function deletions(client: ReturnType<Pool['client']>, key: string, startRevision?: bigint): { seen: IKeyValue[]; created: bigint[]; failed: Error[]; w: KeyWatch } {
  const out = { seen: [] as IKeyValue[], created: [] as bigint[], failed: [] as Error[] } as { seen: IKeyValue[]; created: bigint[]; failed: Error[]; w: KeyWatch };
  out.w = watchKey(client, { key: Buffer.from(key), deletesOnly: true, startRevision }, {
    created: (rev) => out.created.push(rev),
    event: (type, kv) => {
      expect(type).toBe('delete');
      out.seen.push(kv);
    },
    failed: (e) => out.failed.push(e),
  });
  return out;
}

describe('the etcd watch stream', () => {
  it('creates a client\'s watches without waiting for each created reply: 100 watches over a link with 25 ms each way are all at the server within 1.5 s (one at a time: ≥ 5 s)', async () => {
    const proxy = await new FaultProxy({ target: { port: server().clientPort } }).start();
    try {
      const client = pool.client([`http://${proxy.address}`]);
      await client.get('warm').string(); // the connection is up before the delay starts
      const name = uniqueName('pipelined');
      for (const i of [7, 42, 99]) await pool.shared().put(`${name}/${i}`).value('x');
      const before = await serverWatchers();
      proxy.delay(25);
      const t0 = performance.now();
      const ws = Array.from({ length: 100 }, (_, i) => deletions(client, `${name}/${i}`));
      await until(() => ws.every((w) => w.created.length === 1), 10_000, 'every watch created');
      const took = performance.now() - t0;
      expect(took).toBeLessThan(1500);
      expect(await serverWatchers()).toBe(before + 100);
      proxy.heal();
      // Each deletion reaches its own watch, and only it.
      for (const i of [7, 42, 99]) await pool.shared().delete().key(`${name}/${i}`);
      await pool.shared().put(`${name}/0`).value('x');
      await pool.shared().delete().key(`${name}/0`);
      await until(() => ws[0]!.seen.length === 1 && ws[7]!.seen.length === 1 && ws[42]!.seen.length === 1 && ws[99]!.seen.length === 1, 5000, 'the deletions');
      await new Promise((r) => setTimeout(r, 200));
      expect(ws.map((w, i) => [i, w.seen.length]).filter(([, n]) => n !== 0)).toEqual([[0, 1], [7, 1], [42, 1], [99, 1]]);
      expect(ws[42]!.seen[0]!.key.toString()).toBe(`${name}/42`);
      for (const w of ws) w.w.cancel();
      await until(async () => (await serverWatchers()) === before, 5000, 'every watch cancelled at the server');
      expect(ws.every((w) => w.failed.length === 0)).toBe(true);
    } finally {
      await proxy.stop();
    }
  });

  it('a watch cancelled before its created reply is gone at the server and delivers nothing', async () => {
    const client = pool.client();
    const name = uniqueName('cancelled');
    const before = await serverWatchers();
    const a = deletions(client, `${name}/a`);
    a.w.cancel();
    const b = deletions(client, `${name}/b`); // the stream goes on serving the others
    await until(() => b.created.length === 1, 5000, 'b created');
    await pool.shared().put(`${name}/a`).value('x');
    await pool.shared().delete().key(`${name}/a`);
    await pool.shared().put(`${name}/b`).value('x');
    await pool.shared().delete().key(`${name}/b`);
    await until(() => b.seen.length === 1, 5000, 'b hears its deletion');
    expect(a.seen).toEqual([]);
    expect(a.created).toEqual([]);
    expect(await serverWatchers()).toBe(before + 1);
    b.w.cancel();
  });

  it('a deletion made while the stream is down (connection reset, link blackholed) is replayed once it is back, exactly once', async () => {
    const proxy = await new FaultProxy({ target: { port: server().clientPort } }).start();
    try {
      const client = pool.client([`http://${proxy.address}`]);
      const key = `${uniqueName('gap')}/k`;
      await pool.shared().put(key).value('x');
      const w = deletions(client, key);
      await until(() => w.created.length === 1, 5000, 'created');
      const streams = watchStreamStats(client).streams;
      proxy.blackhole();
      proxy.cut(); // the stream breaks; no new connection gets through until heal
      const del = await pool.shared().delete().key(key).exec();
      await pool.shared().put(key).value('again'); // a later incarnation, not deleted: no second event
      await new Promise((r) => setTimeout(r, 300));
      expect(w.seen).toEqual([]);
      proxy.heal();
      await until(() => w.seen.length === 1, 10_000, 'the replayed deletion');
      expect(w.seen[0]!.mod_revision).toBe(del.header.revision);
      expect(watchStreamStats(client).streams).toBe(streams + 1);
      await new Promise((r) => setTimeout(r, 200));
      expect(w.seen.length).toBe(1);
      expect(w.failed).toEqual([]);
      w.w.cancel();
    } finally {
      await proxy.stop();
    }
  });

  it('closing the client fails its watches with ClientClosedError, and any made after', async () => {
    const client = pool.client();
    const key = `${uniqueName('closed')}/k`;
    const w = deletions(client, key);
    await until(() => w.created.length === 1, 5000, 'created');
    client.close();
    expect(w.failed.length).toBe(1);
    expect(w.failed[0]).toBeInstanceOf(ClientClosedError);
    const later = deletions(client, key);
    await until(() => later.failed.length === 1, 1000, 'the later watch failed');
    expect(later.failed[0]).toBeInstanceOf(ClientClosedError);
  });

  it('a watch whose resume revision was compacted away reports failed (the caller re-reads)', async () => {
    const client = pool.client();
    const key = `${uniqueName('compacted')}/k`;
    const put = await pool.shared().put(key).value('x').exec();
    await pool.shared().put(key).value('y');
    const latest = await pool.shared().put(key).value('z').exec();
    await pool.shared().kv.compact({ revision: latest.header.revision, physical: true });
    const w = deletions(client, key, BigInt(put.header.revision));
    await until(() => w.failed.length === 1, 5000, 'failed');
    expect(String(w.failed[0]!.message)).toMatch(/compact/);
  });

  it('readKey: the checks one client asks for in one turn go out as one txn, each answered with its own key; an aborted caller rejects with its reason and the rest are answered', async () => {
    const client = pool.client();
    const txn = (req: Parameters<typeof client.kv.txn>[0]) => client.kv.txn(req);
    const base = uniqueName('reads');
    const present = Array.from({ length: 70 }, (_, i) => `${base}/k${i}`); // more than one txn's worth (64)
    for (const k of present) await pool.shared().put(k).value('x');
    const created = new Map((await pool.shared().getAll().prefix(`${base}/`).exec()).kvs.map((kv) => [kv.key.toString(), kv.create_revision]));
    const revision = BigInt((await pool.shared().kv.range({ key: Buffer.from(base) })).header.revision);
    const txns0 = await serverCalls(server().endpoints[0]!, 'Txn');
    const gone = new AbortController();
    const reads = [...present, `${base}/missing`].map((k) => readKey(client, txn, Buffer.from(k), new AbortController().signal));
    const aborted = expect(readKey(client, txn, Buffer.from(`${base}/k0`), gone.signal)).rejects.toThrow('caller gave up');
    gone.abort(new Error('caller gave up'));
    const answers = await Promise.all(reads);
    await aborted;
    expect(answers.map((a) => a.createRevision)).toEqual([...present.map((k) => created.get(k)), undefined]);
    for (const a of answers) expect(a.revision).toBeGreaterThanOrEqual(revision);
    expect((await serverCalls(server().endpoints[0]!, 'Txn')) - txns0).toBe(2); // 71 reads: 64 + 7
  });

  it('waitDeleted: a predecessor deleted before the watch was created still wakes the waiter (the check after creation), and so does a new incarnation under the same key', async () => {
    const client = pool.client();
    const session = await pool.session({ client });
    const txn = (req: Parameters<typeof client.kv.txn>[0]) => client.kv.txn(req);
    const key = `${uniqueName('raced')}/k`;
    await pool.shared().put(key).value('x');
    const [pred] = (await pool.shared().kv.range({ key: Buffer.from(key) })).kvs;
    await pool.shared().delete().key(key); // gone before any watch exists: no event will come
    const t0 = performance.now();
    await waitDeleted(client, txn, pred!, new AbortController().signal, silent);
    expect(performance.now() - t0).toBeLessThan(1000);
    await pool.shared().put(key).value('new incarnation');
    await waitDeleted(client, txn, pred!, new AbortController().signal, silent);
    expect(session.closed).toBe(false);
  });

  it('waitDeleted: the second watch hedging a start behind the check\'s revision is cancelled after a second; the first still wakes the waiter', async () => {
    const proxy = await new FaultProxy({ target: { port: server().clientPort } }).start();
    const writing = new AbortController();
    try {
      const client = pool.client([`http://${proxy.address}`]);
      const txn = (req: Parameters<typeof client.kv.txn>[0]) => client.kv.txn(req);
      const name = uniqueName('hedge');
      await pool.shared().put(`${name}/pred`).value('x');
      const [pred] = (await pool.shared().kv.range({ key: Buffer.from(`${name}/pred`) })).kvs;
      await client.get('warm').string();
      const before = await serverWatchers();
      const creates = watchStreamStats(client).creates;
      // Commits land between the watch's creation and its check (a slow link, a busy writer).
      proxy.delay(20);
      const writer = (async () => {
        for (let i = 0; !writing.signal.aborted; i++) await pool.shared().put(`${name}/other`).value(String(i));
      })();
      const woken = waitDeleted(client, txn, pred!, new AbortController().signal, silent);
      await until(() => watchStreamStats(client).creates - creates === 2, 5000, 'the second watch');
      writing.abort();
      await writer;
      await until(async () => (await serverWatchers()) === before + 2, 3000, 'both watches at the server');
      await until(async () => (await serverWatchers()) === before + 1, 3000, 'the second watch cancelled');
      await pool.shared().delete().key(`${name}/pred`);
      await woken;
      await until(async () => (await serverWatchers()) === before, 3000, 'no watch left');
    } finally {
      writing.abort();
      await proxy.stop();
    }
  });

  it('a queued waiter wakes once when its predecessor is released while its watch stream is reset, and never re-queues', async () => {
    const proxy = await new FaultProxy({ target: { port: server().clientPort } }).start();
    try {
      const name = uniqueName('m');
      const a = new EtcdMutex(await pool.session(), name);
      const b = new EtcdMutex(await pool.session({ client: pool.client([`http://${proxy.address}`]) }), name);
      const held = await a.acquire();
      const got = b.acquire({ timeoutMs: 5000 });
      await until(() => b.stats.predecessorWatches === 1, 5000, 'b waiting');
      await new Promise((r) => setTimeout(r, 100)); // b's watch and check are done
      proxy.blackhole();
      proxy.cut();
      await held.release();
      await new Promise((r) => setTimeout(r, 200));
      proxy.heal();
      const lease = await got;
      expect(b.stats).toEqual({ predecessorWatches: 1, predecessorWakeups: 1 });
      await lease.release();
    } finally {
      await proxy.stop();
    }
  });
});
