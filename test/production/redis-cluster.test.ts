import { afterAll, beforeAll, expect, it } from 'vitest';
import { Cluster } from 'ioredis';
import { RedisElection, RedisFencedResource, RedisLock } from '../../src/recipes/redis/index.js';
import { StaleFenceError } from '../../src/index.js';
import { RedisCluster } from '../../src/testing/index.js';

/** Redis Cluster, 3 primaries: every key of a lock's scripts is in the name's slot. */
let cluster: RedisCluster;
let client: Cluster;
// Guard 0: the cluster is new (every name would first wait out the restart guard).
const opts = { ttlMs: 1500, restartGuardMs: 0 };

beforeAll(async () => {
  cluster = await new RedisCluster().start();
  client = new Cluster(cluster.nodes, { lazyConnect: true });
  await client.connect();
});
afterAll(async () => {
  client?.disconnect();
  await cluster?.stop();
});

const slotOf = async (key: string): Promise<number> => Number(await client.cluster('KEYSLOT', key));

it('RedisLock keeps its lease across a MOVED of its slot mid-hold, and the next holder gets a higher fence', async () => {
  const name = 'cluster-lock';
  const lock = new RedisLock(client, name, opts);
  const other = new RedisLock(client, name, opts);
  const lease = await lock.acquire({ timeoutMs: 5000 });
  const slot = await slotOf(`{${name}}`);
  const from = await cluster.ownerOf(slot);
  await cluster.moveSlot(slot, cluster.members.find((m) => m !== from)!);
  // Renewals follow the MOVED: two TTLs later the lease still holds, and excludes.
  await new Promise((r) => setTimeout(r, 2 * opts.ttlMs));
  expect(lease.signal.aborted).toBe(false);
  expect(await other.tryAcquire()).toBeUndefined();
  await lease.release();
  const next = await other.acquire({ timeoutMs: 5000 });
  expect(next.fence).toBeGreaterThan(lease.fence);
  await next.release();
  await Promise.all([lock.close(), other.close()]);
});

it('RedisElection elects one leader at a time on a cluster and hands over on resign', async () => {
  const a = new RedisElection(client, 'cluster-election', { ...opts, id: 'a' });
  const b = new RedisElection(client, 'cluster-election', { ...opts, id: 'b' });
  const termA = await a.campaign();
  const pending = b.campaign();
  await a.resign();
  const termB = await pending;
  expect(termA.signal.aborted).toBe(true);
  expect(termB.fence).toBeGreaterThan(termA.fence);
  await Promise.all([a.close(), b.close()]);
});

it('RedisFencedResource on a cluster: keys under one hash tag, stale fences refused; a cross-slot write is refused by Redis', async () => {
  const res = new RedisFencedResource(client, '{ledger}:fence');
  await res.write(10n, (w) => w.set('{ledger}:balance', 1));
  await expect(res.write(9n, (w) => w.set('{ledger}:balance', 2))).rejects.toBeInstanceOf(StaleFenceError);
  expect(await client.get('{ledger}:balance')).toBe('1');
  await expect(res.write(11n, (w) => w.set('{elsewhere}:x', 1))).rejects.toThrow(/CROSSSLOT/);
  expect(await res.highestFence()).toBe(10n);
});
