import { describe, expect, it } from 'vitest';
import { InMemoryFencedResource, StaleFenceError } from '../../src/index.js';
import { FaultProxy, spawnWorker, type WorkerEvent, type WorkerHandle } from '../../src/testing/index.js';
import { pollValue } from '../helpers/wait.js';

/**
 * The lifecycle manager's failure cases in real separate processes (issue 10), for one backend:
 * two managers on one name; the leader is SIGKILLed, SIGSTOPped past its TTL, or cut off by a
 * blackholed link. The other's `onElected` must run within the TTL (session timeout) plus a
 * bound; a paused or partitioned leader's term signal must have aborted before the other's
 * `onElected` ran (shared monotonic clock); its late writes must be refused by the fence.
 */
export interface FailoverStore {
  endpoint(): string;
  port(): number;
  stop(): Promise<void>;
}

const TTL_MS = 2000;
/** TTL plus the store's expiry check and the waiter's wake-up, on a loaded 2-core machine. */
const FAILOVER_MAX_MS = TTL_MS + 4000;

const fixture = new URL('./fixtures/manager.ts', import.meta.url).pathname;
let seq = 0;

/** Two managers on one name: the first leads before the second starts (and queues behind it). */
async function pair(backend: string, endpoints: [string, string]): Promise<{ leader: WorkerHandle; follower: WorkerHandle; elected: WorkerEvent }> {
  const name = `lc-${process.pid}-${++seq}`;
  const spawn = (endpoint: string, id: string): Promise<WorkerHandle> => spawnWorker(fixture, [], { env: { PLAN: JSON.stringify({ backend, endpoint, name, id, ttlMs: TTL_MS }) } });
  const leader = await spawn(endpoints[0], 'leader');
  const first = await leader.waitFor('elected', { timeoutMs: 30_000 });
  const follower = await spawn(endpoints[1], 'follower');
  await follower.waitFor('ready', { timeoutMs: 30_000 });
  await new Promise((r) => setTimeout(r, 300)); // queued behind the leader
  return { leader, follower, elected: first };
}

const ms = (a: bigint, b: bigint): number => Number(a - b) / 1e6;
const elected = (w: WorkerHandle): WorkerEvent[] => w.events.filter((e) => e.type === 'elected');

export function failoverSuite(backend: 'etcd' | 'zk' | 'redis' | 'postgres', start: () => Promise<FailoverStore>): void {
  describe(`LeadershipManager in separate processes: ${backend}`, () => {
    it("a SIGKILLed leader's successor runs onElected within the TTL plus a bound", async () => {
      const store = await start();
      const { leader, follower, elected: first } = await pair(backend, [store.endpoint(), store.endpoint()]);
      try {
        const killedAt = process.hrtime.bigint();
        await leader.kill();
        const next = await follower.waitFor('elected', { timeoutMs: 30_000 });
        const failover = ms(next.t, killedAt);
        console.log(`[${backend}] manager failover after SIGKILL: ${failover.toFixed(0)} ms at TTL ${TTL_MS} ms`);
        expect(failover).toBeLessThan(FAILOVER_MAX_MS);
        expect(BigInt(next.data.fence as string)).toBeGreaterThan(BigInt(first.data.fence as string));
      } finally {
        await Promise.all([leader.kill(), follower.kill()]);
        await store.stop();
      }
    });

    it("a leader SIGSTOPped past its TTL: its term had ended (local deadline) before the successor's onElected, and its late writes are refused", async () => {
      const store = await start();
      const { leader, follower } = await pair(backend, [store.endpoint(), store.endpoint()]);
      try {
        await pollValue(async () => (leader.events.some((e) => e.type === 'write') ? true : undefined), 10_000);
        await new Promise((r) => setTimeout(r, 20)); // land in the write loop's unchecked window
        leader.pause();
        const next = await follower.waitFor('elected', { timeoutMs: 30_000 });
        await pollValue(async () => (follower.events.some((e) => e.type === 'write' && e.t > next.t) ? true : undefined), 10_000);
        leader.resume();
        const aborted = await leader.waitFor('aborted', { timeoutMs: 15_000 });
        await leader.waitFor('demoted', { timeoutMs: 15_000 });
        const deadline = BigInt(aborted.data.deadlineNs as string);
        console.log(`[${backend}] paused manager: its term's deadline passed ${ms(next.t, deadline).toFixed(0)} ms before the successor's onElected`);
        expect(deadline).toBeLessThan(next.t);
        // Every write, applied to a fenced resource in the order it was sent.
        const resource = new InMemoryFencedResource('lc');
        const refused = new Set<WorkerEvent>();
        const writes = [...leader.events, ...follower.events].filter((e) => e.type === 'write').sort((a, b) => (a.t < b.t ? -1 : 1));
        for (const w of writes) {
          await resource.write(BigInt(w.data.fence as string), () => undefined).catch((e: unknown) => {
            if (!(e instanceof StaleFenceError)) throw e;
            refused.add(w);
          });
        }
        const late = writes.filter((w) => w.pid === leader.pid && w.t > next.t);
        for (const w of late) expect(refused.has(w), 'a late write of the paused leader was accepted').toBe(true);
      } finally {
        leader.resume();
        await Promise.all([leader.kill(), follower.kill()]);
        await store.stop();
      }
    });

    it("a leader behind a blackholed link: its term's signal aborts before the successor's onElected", async () => {
      const store = await start();
      const proxy = await new FaultProxy({ target: { port: store.port() } }).start();
      const { leader, follower } = await pair(backend, [proxy.address, store.endpoint()]);
      try {
        proxy.blackhole();
        const next = await follower.waitFor('elected', { timeoutMs: 30_000 });
        const aborted = await leader.waitFor('aborted', { timeoutMs: 15_000 });
        console.log(`[${backend}] blackholed manager: term signal aborted ${ms(next.t, aborted.t).toFixed(0)} ms before the successor's onElected`);
        expect(aborted.t).toBeLessThan(next.t);
        expect(elected(follower)).toHaveLength(1);
      } finally {
        await Promise.all([leader.kill(), follower.kill()]);
        await proxy.stop();
        await store.stop();
      }
    });
  });
}
