import { describe, expect, it } from 'vitest';
import { ClosedError, ConfigError, LeadershipManager, StateError, TermEndedError, type DemotionInfo, type LeaderInfo, type TermContext } from '../../src/index.js';
import { FaultProxy } from '../../src/testing/index.js';
import { pollValue, settlesWithin } from '../helpers/wait.js';
import { LOST_RELEASE_BOUND_MS, type CandidateBackend } from './candidate.js';

/**
 * The lifecycle manager's contract, run unchanged over the etcd, ZooKeeper, Redis and Postgres
 * candidates (the manager knows only `Candidate`). Each test builds managers on fresh names.
 */
const WAIT = 20_000;
let seq = 0;

/** Records a manager's life for assertions: every hook call and event, stamped. */
function recorder(m: LeadershipManager) {
  const log: { what: string; at: number; fence?: bigint; info?: DemotionInfo }[] = [];
  m.onElected((ctx) => void log.push({ what: 'elected', at: performance.now(), fence: ctx.fence }));
  m.onDemoted((info) => void log.push({ what: 'demoted', at: performance.now(), fence: info.fence, info }));
  return log;
}

export function managerContract(kind: string, backend: () => CandidateBackend): void {
  describe(`LeadershipManager contract: ${kind}`, () => {
    const fresh = (): string => `mgr-${process.pid}-${++seq}`;
    const manager = async (name: string, id: string, options = {}) => new LeadershipManager(await backend().make(name, id), { backoff: { initialMs: 20, maxMs: 200 }, ...options });

    it('resign: the signal aborts first, then the drain waits for the hook, then the lease goes, then onDemoted once; the waiting manager leads next', async () => {
      const name = fresh();
      const a = await manager(name, 'a');
      const b = await manager(name, 'b');
      const order: string[] = [];
      let aborted = 0;
      a.onElected(async ({ signal }) => {
        await new Promise<void>((r) => signal.addEventListener('abort', () => r(), { once: true }));
        aborted = performance.now();
        order.push('signal aborted');
        expect(a.isLeader()).toBe(false);
        await new Promise((r) => setTimeout(r, 150)); // in-flight work finishing after the abort
        order.push('hook settled');
      });
      a.onDemoted((info) => void order.push(`demoted ${info.reason}`));
      const bElected = new Promise<number>((r) => b.onElected(() => r(performance.now())));
      a.start();
      const ta = await a.whenElected({ timeoutMs: WAIT });
      expect(await a.whenElected()).toBe(ta); // at once while leading
      b.start();
      await new Promise((r) => setTimeout(r, 200));
      expect(a.isLeader()).toBe(true);
      await a.resign({ cooldownMs: 5000 });
      expect(order).toEqual(['signal aborted', 'hook settled', 'demoted resigned']);
      expect(ta.signal.reason).toBeInstanceOf(TermEndedError);
      expect((ta.signal.reason as TermEndedError).reason).toBe('resigned');
      const bAt = await bElected;
      expect(bAt).toBeGreaterThan(aborted + 140); // the lease went only after the drain
      expect(b.currentTerm!.fence).toBeGreaterThan(ta.fence);
      await Promise.all([a.close(), b.close()]);
    });

    it('a term lost from outside: the signal aborts with the loss reason, onDemoted says lost, and the same manager leads again with a higher fence', async () => {
      const be = backend();
      const name = fresh();
      const m = new LeadershipManager(await be.make(name, 'solo'), { backoff: { initialMs: 20, maxMs: 200 } });
      const log = recorder(m);
      m.start();
      const first = await m.whenElected({ timeoutMs: WAIT });
      await be.loseFromOutside(m.candidate, first.term);
      await pollValue(async () => (log.some((l) => l.what === 'demoted') ? true : undefined), WAIT);
      const demoted = log.find((l) => l.what === 'demoted')!.info!;
      expect(demoted.reason).toBe('lost');
      expect(demoted.lostReason).toBeDefined();
      expect((first.signal.reason as TermEndedError).lostReason).toBe(demoted.lostReason);
      const second = await m.whenElected({ timeoutMs: WAIT });
      expect(second.fence).toBeGreaterThan(first.fence);
      // Terms alternate; on ZooKeeper an expiry from outside may first show as a disconnect (the
      // term ends as suspended, the latch re-joins on the doomed session) and then as the expiry
      // (that term ends too, the latch re-joins on the new session): both end before the next.
      const whats = log.map((l) => l.what);
      expect(whats.slice(0, 3)).toEqual(['elected', 'demoted', 'elected']);
      whats.forEach((w, i) => expect(w).toBe(i % 2 === 0 ? 'elected' : 'demoted'));
      await m.close();
    });

    it('a hook that throws ends the term with hook-error, reports the error, and the manager campaigns again', async () => {
      const m = await manager(fresh(), 'x');
      const errors: unknown[] = [];
      m.on('error', (e) => errors.push(e));
      let n = 0;
      m.onElected(async () => {
        if (++n === 1) throw new Error('boom');
      });
      const log = recorder(m);
      m.start();
      await pollValue(async () => (n >= 2 ? true : undefined), WAIT);
      expect(log[1]?.info?.reason).toBe('hook-error');
      expect((log[1]?.info?.error as Error).message).toBe('boom');
      expect(errors.some((e) => (e as Error).message === 'boom')).toBe(true);
      expect(log[2]!.fence!).toBeGreaterThan(log[0]!.fence!);
      await m.close();
    });

    it('a hook that ignores its signal is drained by the deadline, reported, and no second term starts in this process until it settles', async () => {
      const m = await manager(fresh(), 'x', { drainTimeoutMs: 200 });
      const errors: unknown[] = [];
      m.on('error', (e) => errors.push(e));
      let release!: () => void;
      let terms = 0;
      m.onElected(async () => {
        if (++terms === 1) await new Promise<void>((r) => (release = r)); // ignores its signal
      });
      const log = recorder(m);
      m.start();
      await m.whenElected({ timeoutMs: WAIT });
      void m.resign();
      await pollValue(async () => (log.some((l) => l.what === 'demoted') ? true : undefined), WAIT);
      expect(log.find((l) => l.what === 'demoted')!.info!.timedOut).toBe(true);
      expect(errors.some((e) => e instanceof StateError)).toBe(true);
      await new Promise((r) => setTimeout(r, 500));
      expect(terms).toBe(1); // not campaigning while the old hook still runs
      release();
      await pollValue(async () => (terms === 2 ? true : undefined), WAIT);
      await m.close();
    });

    it('releaseOnReturn: leadership ends when the hook returns, and the manager queues again', async () => {
      const m = await manager(fresh(), 'x', { releaseOnReturn: true });
      const log = recorder(m);
      m.onElected(async () => new Promise((r) => setTimeout(r, 20)));
      m.start();
      await pollValue(async () => (log.filter((l) => l.what === 'elected').length >= 2 ? true : undefined), WAIT);
      expect(log[1]?.info?.reason).toBe('hook-returned');
      await m.close();
    });

    it('work tracked from outside the hook is drained too, and is refused once the term ended', async () => {
      const m = await manager(fresh(), 'x');
      const order: string[] = [];
      m.onDemoted(() => void order.push('demoted'));
      m.start();
      await m.whenElected({ timeoutMs: WAIT });
      const work = m.track(async ({ signal }) => {
        await new Promise<void>((r) => signal.addEventListener('abort', () => r(), { once: true }));
        await new Promise((r) => setTimeout(r, 100));
        order.push('work done');
      });
      await m.resign({ cooldownMs: 60_000 });
      await work;
      expect(order).toEqual(['work done', 'demoted']);
      await expect(m.track(async () => 1)).rejects.toMatchObject({ code: 'NOT_LEADER' });
      await m.close();
    });

    it('close(): demotes with reason closed, stops campaigning, is idempotent; leaderChanged and state events are typed and in order', async () => {
      const name = fresh();
      const a = await manager(name, 'a');
      const watcher = await manager(name, 'w');
      const seen: (LeaderInfo | undefined)[] = [];
      const states: string[] = [];
      watcher.on('leaderChanged', (l) => seen.push(l));
      a.on('state', (s) => states.push(s));
      const log = recorder(a);
      a.start();
      const ta: TermContext = await a.whenElected({ timeoutMs: WAIT });
      watcher.start(); // campaigns too (it queues behind a) and observes
      await pollValue(async () => (seen.some((l) => l?.id === 'a') ? true : undefined), WAIT);
      expect(seen.find((l) => l?.id === 'a')?.fence).toBe(ta.fence);
      await a.close();
      await a.close();
      expect(log.at(-1)?.info?.reason).toBe('closed');
      expect(a.state).toBe('closed');
      expect(states.slice(0, 3)).toEqual(['campaigning', 'leader', 'draining']);
      expect(states.at(-1)).toBe('closed');
      expect(() => a.start()).toThrow(ClosedError);
      await pollValue(async () => (seen.some((l) => l?.id === 'w') ? true : undefined), WAIT);
      await watcher.close();
    });

    it('validates its options and hooks, and refuses a second start', async () => {
      const c = await backend().make(fresh(), 'x');
      expect(() => new LeadershipManager({} as never)).toThrow(ConfigError);
      expect(() => new LeadershipManager(c, { drainTimeoutMs: -1 })).toThrow(expect.objectContaining({ field: 'drainTimeoutMs' }));
      expect(() => new LeadershipManager(c, { drainTimeoutMs: 2 ** 31 })).toThrow(expect.objectContaining({ field: 'drainTimeoutMs' }));
      expect(() => new LeadershipManager(c, { backoff: { initialMs: 0 } })).toThrow(expect.objectContaining({ field: 'backoff.initialMs' }));
      expect(() => new LeadershipManager(c, { releaseOnReturn: 'yes' as never })).toThrow(expect.objectContaining({ field: 'releaseOnReturn' }));
      expect(() => new LeadershipManager(c, { logger: {} as never })).toThrow(expect.objectContaining({ field: 'logger' }));
      const m = new LeadershipManager(c);
      expect(() => m.onElected('x' as never)).toThrow(expect.objectContaining({ field: 'hook' }));
      expect(() => m.onDemoted(null as never)).toThrow(expect.objectContaining({ field: 'hook' }));
      await expect(m.resign({ cooldownMs: -5 })).rejects.toMatchObject({ field: 'cooldownMs' });
      m.start();
      expect(() => m.start()).toThrow(StateError);
      await m.close();
      await expect(m.whenElected()).rejects.toBeInstanceOf(ClosedError);
    });

    it("a leader behind a blackholed link: its onDemoted runs before the next leader's onElected, and its lost lease's release settles at once", async () => {
      const be = backend();
      const name = fresh();
      const proxies = [await new FaultProxy({ target: { port: be.port() } }).start(), await new FaultProxy({ target: { port: be.port() } }).start()] as const;
      const options = { backoff: { initialMs: 20, maxMs: 200 }, observeLeader: false };
      const a = new LeadershipManager(await be.makeThrough(name, 'a', proxies[0].port), options);
      const b = new LeadershipManager(await be.makeThrough(name, 'b', proxies[1].port), options);
      try {
        const aLog = recorder(a);
        const bLog = recorder(b);
        let abortedAt = 0;
        a.onElected(({ signal }) => void signal.addEventListener('abort', () => (abortedAt ||= performance.now()), { once: true }));
        a.start();
        const ta = await a.whenElected({ timeoutMs: WAIT });
        b.start();
        await new Promise((r) => setTimeout(r, 300)); // b queues behind a
        proxies[0].blackhole();
        const tb = await b.whenElected({ timeoutMs: WAIT });
        const bElected = bLog.find((l) => l.what === 'elected')!;
        expect(tb.fence).toBeGreaterThan(ta.fence);
        const aDemoted = aLog.find((l) => l.what === 'demoted' && l.fence === ta.fence);
        expect(aDemoted, "a's onDemoted had not run when b's onElected ran").toBeDefined();
        expect(aDemoted!.info!.reason).toBe('lost');
        expect(abortedAt).toBeGreaterThan(0);
        expect(abortedAt).toBeLessThanOrEqual(aDemoted!.at); // the signal first, as ever
        console.log(`[${kind}] blackholed leader: onDemoted ${(aDemoted!.at - abortedAt).toFixed(1)} ms after its signal aborted, ${(bElected.at - aDemoted!.at).toFixed(0)} ms before the successor's onElected`);
        expect(aDemoted!.at).toBeLessThan(bElected.at);
        expect(await settlesWithin(ta.term.release(), LOST_RELEASE_BOUND_MS)).toBe('resolved');
      } finally {
        // b's link is sound: close it first (its release reaches the store); a's is cut for good.
        await b.close();
        await Promise.all(proxies.map((p) => p.stop()));
        await a.close();
      }
    });
  });
}
