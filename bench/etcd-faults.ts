/**
 * Fault measurements for the etcd bench: tenure's EtcdElection and etcd3's Election, each with its
 * leader behind a FaultProxy and a follower connected directly.
 * - zombie window: blackhole the leader's link; (leader's lost signal) − (follower elected).
 *   Negative means the old leader stopped first.
 * - link reset: every connection of the leader is reset for 1 s (shorter than the TTL) while the
 *   application keeps calling etcd; did the leader keep its leadership?
 */
import { performance } from 'node:perf_hooks';
import { Etcd3 } from 'etcd3';
import { EtcdElection, EtcdSession, createEtcdClient } from '../src/recipes/etcd/index.js';
import { FaultProxy, type EtcdServer } from '../src/testing/index.js';

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
let seq = 0;
const unique = (base: string): string => `bench/${base}-${process.pid}-${++seq}`;

/** A leader behind the proxy and a queued follower, for one implementation. */
interface Pair {
  /** Resolves with performance.now() when the leader learns it lost (never, if it does not). */
  leaderLost: Promise<number>;
  /** Resolves with performance.now() when the follower is elected. */
  followerElected: Promise<number>;
  /** One call through the leader's client, as the application would make. */
  appCall(): Promise<unknown>;
  close(): Promise<void>;
}

async function tenurePair(etcd: EtcdServer, proxy: FaultProxy, ttl: number): Promise<Pair> {
  const name = unique('zombie');
  const lc = await createEtcdClient({ hosts: [`http://${proxy.address}`] });
  const fc = await createEtcdClient({ hosts: etcd.endpoints });
  const ls = await EtcdSession.create({ client: lc, ttlMs: ttl * 1000 });
  const fs = await EtcdSession.create({ client: fc, ttlMs: ttl * 1000 });
  const term = await new EtcdElection(ls, name, { id: 'leader' }).campaign();
  const follower = new EtcdElection(fs, name, { id: 'follower' });
  const followerElected = follower.campaign().then(() => performance.now());
  followerElected.catch(() => undefined);
  await sleep(300);
  return {
    leaderLost: new Promise((r) => term.signal.addEventListener('abort', () => r(performance.now()), { once: true })),
    followerElected,
    appCall: () => lc.get(`${name}/app`).string(),
    close: async () => {
      await follower.close().catch(() => undefined);
      await Promise.all([ls.close(), fs.close()]);
      lc.close();
      fc.close();
    },
  };
}

async function etcd3Pair(etcd: EtcdServer, proxy: FaultProxy, ttl: number): Promise<Pair> {
  const name = unique('zombie');
  const lc = new Etcd3({ hosts: [`http://${proxy.address}`] }); // etcd3's default fault handling
  const fc = new Etcd3({ hosts: etcd.endpoints });
  const leader = lc.election(name, ttl).campaign('leader');
  const leaderLost = new Promise<number>((r) => leader.on('error', () => r(performance.now())));
  await leader.wait();
  const follower = fc.election(name, ttl).campaign('follower');
  follower.on('error', () => undefined);
  const followerElected = follower.wait().then(() => performance.now());
  followerElected.catch(() => undefined);
  await sleep(300);
  return {
    leaderLost,
    followerElected,
    appCall: () => lc.get(`${name}/app`).string(),
    close: async () => {
      await Promise.race([Promise.all([leader.resign().catch(() => undefined), follower.resign().catch(() => undefined)]), sleep(2000)]);
      lc.close();
      fc.close();
    },
  };
}

export type PairMaker = (etcd: EtcdServer, proxy: FaultProxy, ttl: number) => Promise<Pair>;
export const pairs: [string, PairMaker][] = [
  ['tenure EtcdElection', tenurePair],
  ['etcd3 Election (defaults)', etcd3Pair],
];

/** For `ms`, resets every connection through the proxy as soon as it is made (calls fail fast). */
export async function linkReset(proxy: FaultProxy, ms: number): Promise<void> {
  const end = performance.now() + ms;
  while (performance.now() < end) {
    proxy.cut();
    await sleep(5);
  }
}

const within = <T>(p: Promise<T>, ms: number): Promise<T | undefined> => Promise.race([p, sleep(ms).then(() => undefined)]);

/** Zombie window in ms (negative: the old leader stopped first), or undefined if the leader never noticed within 20 s. */
export async function zombieWindow(etcd: EtcdServer, make: PairMaker, ttl: number): Promise<{ zombieMs: number | undefined; electedAfterMs: number | undefined }> {
  const proxy = await new FaultProxy({ target: { port: etcd.clientPort } }).start();
  const pair = await make(etcd, proxy, ttl);
  try {
    const t0 = performance.now();
    proxy.blackhole();
    const [lost, elected] = await Promise.all([within(pair.leaderLost, 20_000), within(pair.followerElected, 20_000)]);
    return {
      zombieMs: lost !== undefined && elected !== undefined ? lost - elected : undefined,
      electedAfterMs: elected === undefined ? undefined : elected - t0,
    };
  } finally {
    proxy.heal();
    await pair.close();
    await proxy.stop();
  }
}

/** Whether the leader keeps leadership through a 1 s link reset while the app keeps calling. */
export async function survivesLinkReset(etcd: EtcdServer, make: PairMaker, ttl: number): Promise<boolean> {
  const proxy = await new FaultProxy({ target: { port: etcd.clientPort } }).start();
  const pair = await make(etcd, proxy, ttl);
  let lost = false;
  void pair.leaderLost.then(() => (lost = true));
  void pair.followerElected.then(() => (lost = true), () => undefined);
  let stop = false;
  const app = (async () => {
    while (!stop) {
      await within(pair.appCall().catch(() => undefined), 2000);
      await sleep(50);
    }
  })();
  try {
    await sleep(500);
    await linkReset(proxy, 1000);
    await sleep(ttl * 2000);
    return !lost;
  } finally {
    stop = true;
    await app;
    await pair.close();
    await proxy.stop();
  }
}
