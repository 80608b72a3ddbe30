/**
 * RedisLock vs `redlock` 4.2 and `@sesamecare-oss/redlock` 1.4, each on one Redis node:
 * uncontended acquire+release, 10 contenders, and hand-off latency. The Redlock clients run
 * with their default retry delay/jitter (200 ± 100 ms) and unlimited retries, as users run them.
 * Implementations are interleaved over three rounds; each row is the median round, with the spread.
 */
import { createRequire } from 'node:module';
import { Redis } from 'ioredis';
import { Redlock as SesameRedlock } from '@sesamecare-oss/redlock';
import { RedisLock } from '../src/recipes/redis/index.js';
import { lockKeys } from '../src/recipes/redis/keys.js';
import { ACQUIRE, RELEASE, runScript } from '../src/recipes/redis/scripts.js';
import { RedisServer } from '../src/testing/index.js';
import { cpuNote, interleaved, notes, processCpuUs, spread, timeLoop, type BenchCase, type BenchRow } from './harness.js';
import { contend, contentionRow, handoff, type Acquire } from './contention.js';

interface Redlock4Lock {
  unlock(): Promise<void>;
}
interface Redlock4 {
  lock(resource: string, ttl: number): Promise<Redlock4Lock>;
}
const Redlock4Ctor = createRequire(import.meta.url)('redlock') as new (clients: Redis[], opts: Record<string, number>) => Redlock4;

const TTL = 5000;
type Impl = { impl: string; make: (redis: Redis, name: string) => Promise<{ acquire: Acquire; close(): Promise<void> }> };

const impls: Impl[] = [
  {
    impl: 'tenure RedisLock',
    make: async (redis, name) => {
      const lock = new RedisLock(redis, name, { ttlMs: TTL });
      return {
        acquire: async () => {
          const lease = await lock.acquire();
          return () => lease.release();
        },
        close: () => lock.close(),
      };
    },
  },
  {
    impl: 'redlock 4.2 (1 node)',
    make: async (redis, name) => {
      const rl = new Redlock4Ctor([redis], { retryCount: -1 });
      return {
        acquire: async () => {
          const l = await rl.lock(name, TTL);
          return () => l.unlock();
        },
        close: async () => undefined,
      };
    },
  },
  {
    impl: '@sesamecare-oss/redlock 1.4 (1 node)',
    make: async (redis, name) => {
      const rl = new SesameRedlock([redis], { retryCount: -1 });
      return {
        acquire: async () => {
          const l = await rl.acquire([name], TTL);
          return () => l.release();
        },
        close: async () => undefined,
      };
    },
  },
];

/**
 * Not a lock: tenure's two scripts (ACQUIRE, RELEASE), the same keys and arguments, called back to
 * back on a raw client — the server's work and the round trips of a tenure cycle, without its
 * client work (lease, renewal timer, subscriptions). Uncontended only.
 */
const SCRIPTS = "tenure's scripts alone (raw client, no lease)";
async function scriptsOnly(redis: Redis, name: string): Promise<{ acquire: Acquire; close(): Promise<void> }> {
  const k = lockKeys('tenure:', name);
  let n = 0;
  return {
    acquire: async () => {
      const token = `t${++n}`;
      const [, fence] = (await runScript(redis, ACQUIRE, [k.lock, k.fence, k.boot, k.queue, k.alive, k.ticket], [token, TTL, 0, '1', 10_000, 'id', k.acquired, k.lost])) as [number, number];
      return async () => void (await runScript(redis, RELEASE, [k.lock, k.queue, k.boot], [`${token}:${fence}:id`, k.released, String(fence)]));
    },
    close: async () => undefined,
  };
}

/**
 * The commands the server ran since RESETSTAT and its µs in each, from INFO commandstats (without
 * the CONFIG RESETSTAT). A script's calls count, an INFO inside a script too (the stats never
 * include the INFO reading them); a script's µs include its calls'.
 */
async function serverCost(admin: Redis): Promise<{ calls: number; byCommand: [string, number][] }> {
  const info = await admin.info('commandstats');
  let calls = 0;
  const byCommand: [string, number][] = [];
  for (const m of info.matchAll(/^cmdstat_(\w+):calls=(\d+),usec=(\d+)/gm)) {
    if (m[1] === 'config') continue;
    calls += Number(m[2]);
    byCommand.push([m[1]!, Number(m[3])]);
  }
  return { calls, byCommand };
}

/** "µs per cycle by command: evalsha 21.3 (its calls included), info 2.1, …" (from serverCost; none under 0.05). */
function byCommandNote(byCommand: [string, number][], cycles: number): string {
  const shown = byCommand.filter(([, us]) => us / cycles >= 0.05).sort((x, y) => y[1] - x[1]);
  return `µs per cycle by command: ${shown.map(([cmd, us]) => `${cmd} ${(us / cycles).toFixed(1)}${cmd.startsWith('eval') ? ' (its calls included)' : ''}`).join(', ')}`;
}

async function run({ durationMs }: { durationMs: number }): Promise<BenchRow[]> {
  const server = await new RedisServer().start();
  const clients: Redis[] = [];
  const client = (): Redis => {
    const c = new Redis(server.endpoint);
    clients.push(c);
    return c;
  };
  const rows: BenchRow[] = [];
  try {
    // A fresh server looks like a restarted one: sit out the restart guard once.
    const warm = new RedisLock(client(), 'warm-up', { ttlMs: TTL });
    await (await warm.acquire()).release();
    await warm.close();
    const names = impls.map((i) => i.impl);
    const byName = new Map(impls.map((i) => [i.impl, i.make]));
    const admin = client();
    const solo = await interleaved([...names, SCRIPTS], async (impl) => {
      const one = impl === SCRIPTS ? await scriptsOnly(client(), `solo:${impl}`) : await byName.get(impl)!(client(), `solo:${impl}`);
      await admin.config('RESETSTAT');
      const cpuBefore = processCpuUs(server.pid!);
      const r = await timeLoop(async () => (await one.acquire())(), durationMs);
      const serverCpuUsPerCycle = (processCpuUs(server.pid!) - cpuBefore) / r.calls;
      const cost = await serverCost(admin);
      await one.close();
      return { ...r, serverCpuUsPerCycle, callsPerCycle: cost.calls / r.calls, byCommand: byCommandNote(cost.byCommand, r.calls) };
    }, (r) => r.opsPerSec);
    for (const [impl, { median: r, keys, all }] of solo) {
      rows.push({ group: 'redis lock', scenario: 'uncontended acquire+release', impl, opsPerSec: r.opsPerSec, opsPerRound: all.map((a) => a.opsPerSec), p50Ms: r.p50Ms, p99Ms: r.p99Ms, notes: notes(`server: ${r.callsPerCycle.toFixed(2)} commands per cycle`, cpuNote(all.map((a) => a.serverCpuUsPerCycle), 'server'), r.byCommand, cpuNote(all.map((a) => a.cpuUsPerCall)), spread(keys, 'ops/s')) });
    }
    const ten = await interleaved(names, async (impl) => {
      const contenders = await Promise.all(Array.from({ length: 10 }, () => byName.get(impl)!(client(), `ten:${impl}`)));
      const c = await contend(contenders.map((x) => x.acquire), durationMs);
      await Promise.all(contenders.map((x) => x.close()));
      return c;
    }, (c) => c.opsPerSec);
    for (const [impl, { median: c, keys }] of ten) rows.push(contentionRow('redis lock', impl, c, spread(keys, 'ops/s')));
    const hand = await interleaved(names, async (impl) => {
      const make = byName.get(impl)!;
      const [a, b] = await Promise.all([make(client(), `handoff:${impl}`), make(client(), `handoff:${impl}`)]);
      const h = await handoff(a.acquire, b.acquire, Math.min(durationMs, 1500));
      await Promise.all([a.close(), b.close()]);
      return h;
    }, (h) => h.p50);
    for (const [impl, { median: h, keys }] of hand) rows.push({ group: 'redis lock', scenario: 'hand-off release → waiter granted', impl, p50Ms: h.p50, p99Ms: h.p99, notes: notes(`${h.samples} hand-offs`, spread(keys, 'p50 ms')) });
  } finally {
    for (const c of clients) c.disconnect();
    await server.stop();
  }
  return rows;
}

export const cases: BenchCase[] = [{ group: 'redis lock', run }];
