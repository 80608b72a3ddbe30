import { afterEach, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { RedisFencedResource, RedisLock } from '../../src/recipes/redis/index.js';
import { StaleFenceError } from '../../src/index.js';
import { FaultProxy, RedisServer } from '../../src/testing/index.js';
import { whenAborted } from '../../src/core/abort.js';

/**
 * A replica promoted after its primary died may lack the primary's last writes. The holder on the
 * old primary has not noticed the failover (its renew is still in flight to a dead server): no
 * one may be granted the lock on the new primary while that holder may be live, and the next
 * fence must exceed the holder's.
 */
const closers: (() => Promise<unknown> | void)[] = [];
afterEach(async () => {
  for (const c of closers.splice(0).reverse()) await c();
});

it('a promoted replica that missed the last grant neither repeats its fence nor grants while the old holder may be live', async () => {
  const ttlMs = 1500;
  const primary = await new RedisServer().start();
  closers.push(() => primary.stop());
  // The replica reaches its primary through a proxy, so the test can stall replication.
  const link = await new FaultProxy({ target: { port: primary.port } }).start();
  closers.push(() => link.stop());
  const replica = await new RedisServer({ replicaOf: { port: link.port } }).start();
  closers.push(() => replica.stop());
  await replica.waitForSync();

  // A client per server, as after a failover a client is pointed at the new primary.
  const onPrimary = new Redis({ ...primary.endpoint, maxRetriesPerRequest: null, enableOfflineQueue: true });
  const onReplica = new Redis({ ...replica.endpoint, maxRetriesPerRequest: 1 });
  onPrimary.on('error', () => undefined);
  const name = 'failover';
  const opts = { ttlMs, restartGuardMs: ttlMs, safetyMarginMs: 300 };
  const lockA = new RedisLock(onPrimary, name, opts);
  // Disconnect first: a release sent to the dead primary would wait for it forever.
  closers.push(() => lockA.close(), () => onPrimary.disconnect(), () => onReplica.disconnect());

  // One term with the link up: the epoch marker and the counter reach the replica.
  await (await lockA.acquire({ timeoutMs: 10_000 })).release();
  expect(await onPrimary.wait(1, 2000)).toBe(1);

  // The link stalls just before A's grant: the replica never sees it.
  link.blackhole();
  const a = await lockA.acquire({ timeoutMs: 5000 });
  const aborted = whenAborted(a.signal).then(() => performance.now());

  await primary.kill();
  await replica.promote();

  const lockB = new RedisLock(onReplica, name, opts);
  closers.push(() => lockB.close());
  const b = await lockB.acquire({ timeoutMs: 10_000 });
  const grantedB = performance.now();

  // A's signal aborted (its renew went unanswered) before B was granted, and B's fence is higher.
  expect(a.signal.aborted).toBe(true);
  expect(await aborted).toBeLessThan(grantedB);
  expect(b.fence).toBeGreaterThan(a.fence);

  // A's late write (with its old fence) reaches the new primary after B's: refused.
  const resource = new RedisFencedResource(onReplica, `{${name}}:resource`);
  await resource.write(b.fence, (w) => w.set(`{${name}}:data`, 'B'));
  await expect(resource.write(a.fence, (w) => w.set(`{${name}}:data`, 'A'))).rejects.toBeInstanceOf(StaleFenceError);
  expect(await onReplica.get(`{${name}}:data`)).toBe('B');
  await b.release();
});
