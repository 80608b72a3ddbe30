import { describe, expect, it } from 'vitest';
import { EtcdElection } from '../../src/recipes/etcd/election.js';
import type { EtcdLeaderInfo } from '../../src/recipes/etcd/observe.js';
import { BusyError, ClosedError, ConfigError, NotLeaderError, SessionExpiredError } from '../../src/core/errors.js';
import { etcdForFile, uniqueName, until } from './helpers.js';

const { pool } = etcdForFile();

describe('EtcdElection', () => {
  it('elects one candidate at a time and hands over on resign', async () => {
    const name = uniqueName('e');
    const a = new EtcdElection(await pool.session(), name, { id: 'a' });
    const b = new EtcdElection(await pool.session(), name, { id: 'b' });
    const ta = await a.campaign();
    let bTerm: Awaited<ReturnType<typeof b.campaign>> | undefined;
    const pb = b.campaign().then((t) => (bTerm = t));
    await until(() => b.stats.predecessorWatches === 1, 5000, 'b waiting');
    expect(bTerm).toBeUndefined();
    expect((await a.leader())?.value.toString()).toBe('a');
    await ta.resign();
    await pb;
    expect(bTerm!.fence).toBeGreaterThan(ta.fence);
    expect(bTerm!.key).toBe(b.key);
    expect((await b.leader())?.id).toBe('b');
    expect((await b.leader())?.value.toString()).toBe('b');
    expect((await b.leader())?.fence).toBe(bTerm!.fence);
  });

  it('keeps fences strictly increasing across 120 terms with proclaims in between', async () => {
    const name = uniqueName('e');
    const cands = [new EtcdElection(await pool.session(), name), new EtcdElection(await pool.session(), name)];
    let prevFence = 0n;
    let prevLastRevision = 0n;
    for (let i = 0; i < 120; i++) {
      const term = await cands[i % 2]!.campaign();
      expect(term.fence).toBeGreaterThan(prevFence);
      // Greater than every revision of the previous term, its proclaims and deletion included.
      expect(term.fence).toBeGreaterThan(prevLastRevision);
      await term.proclaim(`v${i}-p1`);
      await term.proclaim(`v${i}-p2`);
      expect(term.fence).toBe(term.fence);
      const info = await cands[0]!.leader();
      expect(info?.fence).toBe(term.fence);
      expect(info?.value.toString()).toBe(`v${i}-p2`);
      prevFence = term.fence;
      await term.resign();
      const r = await pool.shared().kv.range({ key: Buffer.from('x') });
      prevLastRevision = BigInt(r.header.revision);
    }
  });

  it('proclaim keeps the term and its fence; after losing the key it is refused', async () => {
    const name = uniqueName('e');
    const e = new EtcdElection(await pool.session(), name, { id: 'one' });
    const term = await e.campaign();
    await term.proclaim('two');
    expect(term.value.toString()).toBe('two');
    expect(term.signal.aborted).toBe(false);
    await pool.shared().delete().key(term.key);
    await expect(term.proclaim('three')).rejects.toBeInstanceOf(NotLeaderError);
    expect(term.signal.aborted).toBe(true);
  });

  it('an aborted campaign deletes its own key', async () => {
    const name = uniqueName('e');
    const a = new EtcdElection(await pool.session(), name);
    const b = new EtcdElection(await pool.session(), name);
    await a.campaign();
    const ac = new AbortController();
    const p = b.campaign({ signal: ac.signal });
    await until(() => b.stats.predecessorWatches === 1, 5000, 'b waiting');
    ac.abort(new Error('bye'));
    await expect(p).rejects.toThrow('bye');
    expect(await pool.shared().getAll().prefix(`${name}/`).keys()).toEqual([a.key]);
  });

  it('a queued candidate whose session expires rejects with SessionExpiredError', async () => {
    const name = uniqueName('e');
    const a = new EtcdElection(await pool.session(), name);
    const sb = await pool.session();
    const b = new EtcdElection(sb, name);
    await a.campaign();
    const p = b.campaign();
    p.catch(() => undefined);
    await until(() => b.stats.predecessorWatches === 1, 5000, 'b waiting');
    await pool.shared().leaseClient.leaseRevoke({ ID: sb.leaseId });
    await expect(p).rejects.toBeInstanceOf(SessionExpiredError);
  });

  it('observe reports each new leader and each proclaimed value', async () => {
    const name = uniqueName('e');
    const watcher = new EtcdElection(await pool.session(), name);
    const ac = new AbortController();
    const all: (EtcdLeaderInfo | undefined)[] = [];
    const loop = (async () => {
      for await (const l of watcher.observe({ signal: ac.signal })) all.push(l);
    })().catch(() => undefined);
    const seen = (): EtcdLeaderInfo[] => all.filter((l): l is EtcdLeaderInfo => l !== undefined);
    await until(() => all.length >= 1, 5000, 'the first reading');
    expect(all[0]).toBeUndefined(); // nobody leads yet
    const a = new EtcdElection(await pool.session(), name, { id: 'a' });
    const b = new EtcdElection(await pool.session(), name, { id: 'b' });
    const ta = await a.campaign();
    const pb = b.campaign();
    await until(() => seen().length >= 1, 5000, 'first leader');
    await ta.proclaim('a2');
    await until(() => seen().length >= 2, 5000, 'proclaim');
    await ta.proclaim('a2'); // the same value again (as a retried proclaim would put it): no change
    await ta.resign();
    const tb = await pb;
    await until(() => seen().length >= 3, 5000, 'second leader');
    ac.abort();
    await loop;
    expect(seen().map((l) => l.id)).toEqual(['a', 'a2', 'b']);
    expect(seen()[0]!.fence).toBe(ta.fence);
    expect(seen()[1]!.fence).toBe(ta.fence);
    expect(seen()[2]!.fence).toBe(tb.fence);
  });

  it('returns the live term to a second campaign, refuses a concurrent one, bad names, and use after close', async () => {
    const s = await pool.session();
    expect(() => new EtcdElection(s, '')).toThrow(ConfigError);
    expect(() => new EtcdElection(s, 'bad name')).toThrow(ConfigError);
    expect(() => new EtcdElection(s, 'a//b')).toThrow(ConfigError);
    const e = new EtcdElection(s, uniqueName('e'));
    await expect(e.campaign(42 as never)).rejects.toBeInstanceOf(ConfigError);
    expect(() => new EtcdElection(s, uniqueName('e'), { id: '' })).toThrow(ConfigError);
    const other = new EtcdElection(await pool.session(), e.name);
    const first = other.campaign();
    await expect(other.campaign()).rejects.toBeInstanceOf(BusyError);
    await (await first).resign();
    const t = await e.campaign();
    expect(await e.campaign()).toBe(t);
    await e.close();
    expect(t.signal.aborted).toBe(true);
    await expect(e.campaign()).rejects.toBeInstanceOf(ClosedError);
  });
});
