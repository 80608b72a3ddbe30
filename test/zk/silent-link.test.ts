import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type zookeeper from 'node-zookeeper-client';
import { FaultProxy, ZooKeeperServer } from '../../src/testing/index.js';
import { AcquireTimeoutError, StoreUnavailableError } from '../../src/core/errors.js';
import type { Lease } from '../../src/core/lease.js';
import { InterProcessMutex, InterProcessReadWriteLock, InterProcessSemaphoreV2, LeaderLatch, type ZkSession, type ZkSessionOptions } from '../../src/recipes/zk/index.js';
import { eventually, pollValue } from '../helpers/wait.js';
import { children, openSession, rawClient, T } from './helpers.js';

/**
 * A silent link: TCP open, nothing delivered either way (FaultProxy.blackhole). The client
 * believes it is connected, so nothing fails by itself until the session's heartbeat drops the
 * link at 2/3 of the session timeout: with a 9 s session that is 6–9 s, far past a 1 s wait.
 * Every wait must settle within its own bound regardless, and what it leaves behind (a create
 * that lands after the caller gave up, its queued node) must go once the link heals, while the
 * session lives on — so the next acquirer is never blocked by an orphan.
 */

/** Long relative to the waits below: the bug this guards shows only then. */
const SESSION_MS = 9000;
const WAIT_MS = 1000;
/** How long a wait is given to settle before the test calls it hung (keeps a failing run short). */
const CAP_MS = 3000;

let zk: ZooKeeperServer;
let observer: zookeeper.Client;

beforeAll(async () => {
  zk = await new ZooKeeperServer().start();
  observer = await rawClient(zk.connectionString);
});
afterAll(async () => {
  observer?.close();
  await zk?.stop();
});

/** How `p` settled and after how many ms; `ms` is Infinity when it had not settled within CAP_MS. */
async function settle(p: Promise<unknown>, from = performance.now()): Promise<{ ms: number; error: unknown }> {
  let timer: NodeJS.Timeout | undefined;
  const capped = new Promise<{ ms: number; error: unknown }>((r) => (timer = setTimeout(() => r({ ms: Infinity, error: undefined }), CAP_MS)));
  const outcome = p.then(
    () => ({ ms: performance.now() - from, error: undefined }),
    (error: unknown) => ({ ms: performance.now() - from, error }),
  );
  try {
    return await Promise.race([outcome, capped]);
  } finally {
    clearTimeout(timer);
  }
}

function mkdirp(path: string): Promise<void> {
  return new Promise((resolve, reject) => observer.mkdirp(path, (e) => (e ? reject(e) : resolve())));
}

/**
 * A session linked through its own proxy, a bystander session on a direct link; heals and closes
 * everything after `body`, whatever happened.
 */
async function withSilentLink(options: Omit<ZkSessionOptions, 'connectionString'>, body: (ctx: { proxy: FaultProxy; s: ZkSession; other: ZkSession }) => Promise<void>): Promise<void> {
  const proxy = await new FaultProxy({ target: { port: zk.port } }).start();
  const s = await openSession(proxy.address, { ttlMs: SESSION_MS, ...options });
  const other = await openSession(zk.connectionString);
  try {
    await body({ proxy, s, other });
  } finally {
    proxy.heal();
    await Promise.all([s.close(), other.close()]);
    await proxy.stop();
  }
}

/** The session lived through the fault: the same ZooKeeper session, connected again. */
async function sameSessionReconnected(s: ZkSession, id: string): Promise<void> {
  await pollValue(async () => (s.connected ? true : undefined), T.wait);
  expect(s.sessionId, 'the session survived (its nodes did not go by expiry)').toBe(id);
}

type Wait = (s: ZkSession, path: string, options: { timeoutMs?: number; signal?: AbortSignal }) => Promise<Lease | Lease[]>;

/** Nothing of ours is left under `queues`, and the next acquirer (`next`, on a bystander) is granted at once. */
async function noOrphan(queues: string[], next: () => Promise<Lease | Lease[]>): Promise<void> {
  for (const q of queues) await eventually(async () => expect(await children(observer, q)).toEqual([]), 5000);
  const got = await next();
  await Promise.all([got].flat().map((l) => l.release()));
}

const mutex: Wait = (s, p, o) => new InterProcessMutex(s, p).acquire(o);

/** Every ZooKeeper recipe that waits, and the parents its nodes go under. */
const recipes: { name: string; wait: Wait; queues: (path: string) => string[] }[] = [
  { name: 'InterProcessMutex.acquire', wait: mutex, queues: (p) => [p] },
  { name: 'LeaderLatch.campaign', wait: (s, p, o) => new LeaderLatch(s, p).campaign(o), queues: (p) => [p] },
  { name: 'InterProcessSemaphoreV2.acquire', wait: (s, p, o) => new InterProcessSemaphoreV2(s, p, 2).acquire(1, o), queues: (p) => [`${p}/locks`, `${p}/leases`] },
  { name: 'readLock().acquire', wait: (s, p, o) => new InterProcessReadWriteLock(s, p).readLock().acquire(o), queues: (p) => [p] },
  { name: 'writeLock().acquire', wait: (s, p, o) => new InterProcessReadWriteLock(s, p).writeLock().acquire(o), queues: (p) => [p] },
];

describe('a silent link (TCP open, nothing delivered)', () => {
  it.each(recipes)('$name({ timeoutMs }) settles within timeoutMs while its create is in flight; the create that lands later is deleted', async (r) => {
    const path = `/silent/timeout-${r.name.replace(/\W/g, '')}`;
    for (const q of r.queues(path)) await mkdirp(q);
    await withSilentLink({}, async ({ proxy, s, other }) => {
      const id = s.sessionId!;
      proxy.blackhole();
      const { ms, error } = await settle(r.wait(s, path, { timeoutMs: WAIT_MS }));
      expect(ms, `settled after ${Math.round(ms)} ms`).toBeLessThan(WAIT_MS + T.settleSlack);
      expect(error).toBeInstanceOf(AcquireTimeoutError);
      // The held create reaches the server now and its reply comes back to a caller long gone.
      proxy.heal();
      await sameSessionReconnected(s, id);
      await noOrphan(r.queues(path), () => r.wait(other, path, { timeoutMs: 2000 }));
    });
  });

  it('acquire({ signal }) aborted while its create is in flight rejects with exactly signal.reason, and leaves no node', async () => {
    const path = '/silent/signal';
    await mkdirp(path);
    await withSilentLink({}, async ({ proxy, s, other }) => {
      const id = s.sessionId!;
      proxy.blackhole();
      const ac = new AbortController();
      const reason = new Error('the caller gave up');
      const t0 = performance.now();
      const pending = new InterProcessMutex(s, path).acquire({ signal: ac.signal });
      setTimeout(() => ac.abort(reason), WAIT_MS);
      const { ms, error } = await settle(pending, t0);
      expect(ms, `settled after ${Math.round(ms)} ms`).toBeLessThan(WAIT_MS + T.settleSlack);
      expect(error).toBe(reason);
      proxy.heal();
      await sameSessionReconnected(s, id);
      await noOrphan([path], () => mutex(other, path, { timeoutMs: 2000 }));
    });
  });

  it('a waiter watching its predecessor settles within timeoutMs when its link goes silent, and its node goes once the link heals', async () => {
    const path = '/silent/waiting';
    await withSilentLink({}, async ({ proxy, s, other }) => {
      const id = s.sessionId!;
      const holder = await new InterProcessMutex(other, path).acquire();
      const waiter = new InterProcessMutex(s, path);
      const t0 = performance.now();
      const pending = waiter.acquire({ timeoutMs: WAIT_MS });
      await eventually(async () => expect(await children(observer, path)).toHaveLength(2), WAIT_MS);
      proxy.blackhole();
      // The wait ends while silent; the delete of its node goes out but cannot be answered.
      const { ms, error } = await settle(pending, t0);
      expect(ms, `settled after ${Math.round(ms)} ms`).toBeLessThan(WAIT_MS + T.settleSlack);
      expect(error).toBeInstanceOf(AcquireTimeoutError);
      proxy.heal();
      await sameSessionReconnected(s, id);
      await eventually(async () => expect(await children(observer, path)).toHaveLength(1), 5000);
      await holder.release();
      await noOrphan([path], () => mutex(other, path, { timeoutMs: 2000 }));
    });
  });

  it('a create whose reply is lost after its caller gave up is found by its GUID once reconnected, and deleted', async () => {
    const path = '/silent/lost-reply';
    await mkdirp(path);
    await withSilentLink({}, async ({ proxy, s, other }) => {
      const id = s.sessionId!;
      // 500 ms each way: the create reaches the server well before its reply could come back.
      proxy.delay(500);
      const timeoutMs = 100;
      const outcome = settle(new InterProcessMutex(s, path).acquire({ timeoutMs }));
      await eventually(async () => expect(await children(observer, path)).toHaveLength(1), 5000);
      // The reply is on its way back: cut it off. Only the GUID can tell that node is ours.
      proxy.cut();
      proxy.heal();
      const { ms, error } = await outcome;
      expect(ms, `settled after ${Math.round(ms)} ms`).toBeLessThan(timeoutMs + T.settleSlack);
      expect(error).toBeInstanceOf(AcquireTimeoutError);
      await sameSessionReconnected(s, id);
      await noOrphan([path], () => mutex(other, path, { timeoutMs: 2000 }));
    });
  });

  it('an untimed tryAcquire() (and holder(), participants()) rejects within callTimeoutMs; the session drops the suspect link and reconnects once it heals', async () => {
    const path = '/silent/try';
    await mkdirp(path);
    const callTimeoutMs = 1000;
    await withSilentLink({ callTimeoutMs }, async ({ proxy, s, other }) => {
      const id = s.sessionId!;
      const m = new InterProcessMutex(s, path);
      const held: Lease = await new InterProcessMutex(s, `${path}-held`).acquire();
      const states: string[] = [];
      s.on('state', (st) => states.push(st));
      proxy.blackhole();
      const t0 = performance.now();
      const [tried, holder, participants] = await Promise.all([settle(m.tryAcquire(), t0), settle(m.holder(), t0), settle(m.participants(), t0)]);
      for (const [what, r] of Object.entries({ tryAcquire: tried, holder, participants })) {
        expect(r.ms, `${what} settled after ${Math.round(r.ms)} ms`).toBeLessThan(callTimeoutMs + T.settleSlack);
        expect(r.error, what).toBeInstanceOf(StoreUnavailableError);
      }
      // Suspect: the session dropped the link at once (it did not wait for 2/3 of its 9 s
      // timeout), so the holder on it is told at once too (standard policy: SUSPENDED).
      await eventually(async () => expect(states).toEqual(['SUSPENDED']), 1000);
      expect(held.signal.aborted).toBe(true);
      proxy.heal();
      await sameSessionReconnected(s, id);
      expect(states).toEqual(['SUSPENDED', 'RECONNECTED']);
      await noOrphan([path], () => mutex(other, path, { timeoutMs: 2000 }));
      const again = await m.tryAcquire();
      expect(again).toBeDefined();
      await again!.release();
    });
  });
});
