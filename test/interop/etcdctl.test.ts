/**
 * Wire compatibility with Go's `concurrency` package, through the real `etcdctl lock` and
 * `etcdctl elect` (Debian etcd-client): tenure and etcdctl queue on one name and exclude each
 * other, in both directions. Order is proven with CLOCK_MONOTONIC stamps: the waiter's grant
 * comes after the holder's release began, and tenure's fence exceeds the peer's revisions.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import type { Etcd3 } from 'etcd3';
import { EtcdServer } from '../../src/testing/index.js';
import { createEtcdClient } from '../../src/recipes/etcd/index.js';
import type { EtcdSession } from '../../src/recipes/etcd/index.js';
import { etcdctlElect, etcdctlLock, etcdctlObserve, heldKey } from '../peers/etcdctl.js';
import type { LineProcess } from '../peers/line-process.js';
import { closeEtcdSession, etcdElection, etcdMutex, etcdSession } from '../peers/tenure.js';
import { pollValue } from '../helpers/wait.js';

const TTL = 5;
let etcd: EtcdServer;
let raw: Etcd3;
const peers: LineProcess[] = [];
const sessions: EtcdSession[] = [];

beforeAll(async () => {
  etcd = await new EtcdServer().start();
  raw = await createEtcdClient({ hosts: etcd.endpoints });
});
afterEach(async () => {
  await Promise.all(peers.splice(0).map((p) => p.kill()));
  await Promise.all(sessions.splice(0).map((s) => closeEtcdSession(s).catch(() => undefined)));
});
afterAll(async () => {
  raw?.close();
  await etcd?.stop();
});

const name = (base: string): string => `interop/${base}-${randomBytes(4).toString('hex')}`;
const keysUnder = async (n: string): Promise<string[]> => {
  const r = await raw.getAll().prefix(`${n}/`).sort('Create', 'Ascend').keys();
  return r.map((k) => k.toString());
};
const revisions = async (key: string): Promise<{ create: bigint; mod: bigint }> => {
  const kv = (await raw.kv.range({ key: Buffer.from(key) })).kvs[0]!;
  return { create: BigInt(kv.create_revision), mod: BigInt(kv.mod_revision) };
};
/** Waits until `count` keys are queued under the name (the newcomer waits); returns them in queue order. */
const queued = (n: string, count: number): Promise<string[]> =>
  pollValue(async () => {
    const keys = await keysUnder(n);
    return keys.length === count ? keys : undefined;
  });
const session = async (): Promise<EtcdSession> => {
  const s = await etcdSession(etcd.endpoints, TTL);
  sessions.push(s);
  return s;
};
const spawned = (p: LineProcess): LineProcess => {
  peers.push(p);
  return p;
};

describe('tenure and etcdctl on one name', () => {
  it("tenure's EtcdMutex waits behind an etcdctl lock holder and is granted only after etcdctl unlocks", async () => {
    const n = name('lock');
    const go = spawned(etcdctlLock(etcd.endpoints, n, TTL));
    const goKey = (await heldKey(go, n)).text;
    const mutex = etcdMutex(await session(), n);
    let grantedAt: bigint | undefined;
    const acquiring = mutex.acquire().then((lease) => {
      grantedAt = process.hrtime.bigint();
      return lease;
    });
    expect(await queued(n, 2)).toEqual([goKey, mutex.key]);
    expect(grantedAt).toBeUndefined();
    const goRevs = await revisions(goKey);
    const releasedAt = process.hrtime.bigint();
    void go.signal('SIGINT'); // etcdctl unlocks on SIGINT
    const lease = await acquiring;
    expect(grantedAt! > releasedAt).toBe(true);
    expect(lease.fence > goRevs.mod).toBe(true);
    await lease.release();
  });

  it("etcdctl lock waits behind tenure's EtcdMutex and is granted only after tenure releases", async () => {
    const n = name('lock');
    const mutex = etcdMutex(await session(), n);
    const lease = await mutex.acquire();
    const go = spawned(etcdctlLock(etcd.endpoints, n, TTL));
    const [first, second] = await queued(n, 2);
    expect(first).toBe(mutex.key); // etcdctl queued behind tenure's key, by create_revision
    expect(go.lines).toHaveLength(0);
    const releasedAt = process.hrtime.bigint();
    await lease.release();
    const granted = await heldKey(go, n);
    expect(granted.at > releasedAt).toBe(true);
    expect(granted.text).toBe(second);
  });

  it("tenure's EtcdElection reads etcdctl's proposal as the leader and is elected only after etcdctl resigns", async () => {
    const n = name('elect');
    const go = spawned(etcdctlElect(etcd.endpoints, n, 'go-proposal'));
    await go.waitForLine((l) => l === 'go-proposal', 20_000);
    const candidate = etcdElection(await session(), n, 'node-ts');
    expect(await candidate.leaderId()).toBe('go-proposal');
    let electedAt: bigint | undefined;
    const campaigning = candidate.campaign().then((t) => {
      electedAt = process.hrtime.bigint();
      return t;
    });
    await queued(n, 2);
    expect(electedAt).toBeUndefined();
    const resignedAt = process.hrtime.bigint();
    void go.signal('SIGINT'); // etcdctl resigns on SIGINT
    const term = await campaigning;
    expect(electedAt! > resignedAt).toBe(true);
    expect(await candidate.leaderId()).toBe('node-ts');
    await term.release();
  });

  it('etcdctl elect -l sees tenure as the leader, and etcdctl elect is elected only after tenure resigns', async () => {
    const n = name('elect');
    const candidate = etcdElection(await session(), n, 'node-ts');
    const term = await candidate.campaign();
    const observer = spawned(etcdctlObserve(etcd.endpoints, n));
    await observer.waitForLine((l) => l === 'node-ts', 20_000);
    expect(observer.lines[0]?.text).toBe(candidate.key);
    const go = spawned(etcdctlElect(etcd.endpoints, n, 'go-proposal'));
    await queued(n, 2);
    expect(go.lines).toHaveLength(0);
    const resignedAt = process.hrtime.bigint();
    await term.release();
    const elected = await go.waitForLine((l) => l === 'go-proposal', 20_000);
    expect(elected.at > resignedAt).toBe(true);
    await observer.waitForLine((l) => l === 'go-proposal', 20_000);
  });
});
