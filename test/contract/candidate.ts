import { describe, expect, it } from 'vitest';
import { EventEmitter } from 'eventemitter3';
import { BusyError, ClosedError, LeaseLostError, type Candidate, type Clock, type LeaderInfo, type Lease, type LeaseEvents } from '../../src/index.js';
import { FaultProxy } from '../../src/testing/index.js';
import { pollValue, settlesWithin } from '../helpers/wait.js';

/**
 * The contract every Candidate keeps (src/core/candidate.ts), run over etcd, ZooKeeper, Redis and
 * Postgres against real servers. A backend supplies how to make a candidate on a name, how to
 * end a live term from outside (revoke the lease, expire the session, delete the key, kill the
 * backend connection), and how many participants the store holds for a name.
 */
export interface CandidateBackend {
  /** A candidate with `id` on `name`; with `clock`, one whose liveness reads that clock. */
  make(name: string, id: string, clock?: Clock): Promise<Candidate>;
  /** Ends `candidate`'s live term from outside the process's control, at the store. */
  loseFromOutside(candidate: Candidate, term: Lease): Promise<void>;
  /** How many participants (holder and waiters) the store holds for `name`. */
  participants(name: string): Promise<number>;
  /** The TTL the candidates run with (for the fake-clock step). */
  ttlMs: number;
  /**
   * How much later than its successor's election a holder may hear of a loss from outside (0:
   * never later). Redis has no change feed for a key deleted under its holder: the holder hears
   * it from the successor's grant announcement, sent in the same script that grants.
   */
  lossNoticeSlackMs?: number;
  /** Closes what `make` opened. */
  cleanup(): Promise<void>;
  /** The store's port on 127.0.0.1, for a FaultProxy in front of it. */
  port(): number;
  /**
   * A candidate like `make`'s whose every connection to the store goes to `127.0.0.1:port` (a
   * FaultProxy of its own), with the backend's default call bounds (`callTimeoutMs` 5 s).
   */
  makeThrough(name: string, id: string, port: number): Promise<Candidate>;
}

/**
 * How long the release of a lease that is already lost may take: it must not wait on the store,
 * whose calls are bounded by `callTimeoutMs` (5 s by default) — a generous bound far below it.
 */
export const LOST_RELEASE_BOUND_MS = 1000;

const WAIT = 20_000;
let seq = 0;

/** Resolves once `signal` aborts. */
const aborted = (signal: AbortSignal): Promise<void> => (signal.aborted ? Promise.resolve() : new Promise((r) => signal.addEventListener('abort', () => r(), { once: true })));

/** What a backend's candidates do that the contract checks only where it applies. */
export interface CandidateFeatures {
  /**
   * A waiting candidate's liveness runs while it is queued (an etcd lease, a ZooKeeper session),
   * so its grant can be read past its local deadline. (A Redis or Postgres lease starts at the
   * grant's own request: their late replies are covered by their own tests.)
   */
  queuesOnSession?: boolean;
}

export function candidateContract(kind: string, backend: () => CandidateBackend, features: CandidateFeatures = {}): void {
  describe(`Candidate contract: ${kind}`, () => {
    const fresh = (): string => `contract-${process.pid}-${++seq}`;

    it('elects one at a time, shows every participant the leader, and hands over on resign with a higher fence', async () => {
      const b = backend();
      const name = fresh();
      const [x, y] = [await b.make(name, 'x'), await b.make(name, 'y')];
      const tx = await x.campaign({ timeoutMs: WAIT });
      const py = y.campaign({ timeoutMs: WAIT });
      expect(await y.leader()).toMatchObject({ id: 'x', fence: tx.fence });
      expect(x.term).toBe(tx);
      expect(y.term).toBeUndefined();
      await x.resign();
      expect(tx.signal.aborted).toBe(true);
      expect(tx.lostReason).toBe('released');
      const ty = await py;
      expect(ty.fence).toBeGreaterThan(tx.fence);
      expect(await pollValue(async () => ((await x.leader())?.id === 'y' ? true : undefined), WAIT)).toBe(true);
      expect((await x.leader())?.fence).toBe(ty.fence);
      await Promise.all([x.close(), y.close()]);
    });

    it('returns the live term to a second campaign, and refuses a concurrent one', async () => {
      const b = backend();
      const name = fresh();
      const [x, y] = [await b.make(name, 'x'), await b.make(name, 'y')];
      const t = await x.campaign({ timeoutMs: WAIT });
      expect(await x.campaign()).toBe(t);
      const waiting = y.campaign();
      await expect(y.campaign()).rejects.toBeInstanceOf(BusyError);
      await x.close();
      await waiting;
      await y.close();
    });

    it('an aborted or timed-out campaign leaves nothing queued at the store', async () => {
      const b = backend();
      const name = fresh();
      const [x, y] = [await b.make(name, 'x'), await b.make(name, 'y')];
      await x.campaign({ timeoutMs: WAIT });
      await expect(y.campaign({ timeoutMs: 300 })).rejects.toMatchObject({ code: 'ACQUIRE_TIMEOUT' });
      expect(await pollValue(async () => ((await b.participants(name)) === 1 ? 1 : undefined), WAIT)).toBe(1);
      const ac = new AbortController();
      const pending = y.campaign({ signal: ac.signal });
      await new Promise((r) => setTimeout(r, 100));
      ac.abort(new Error('changed my mind'));
      await expect(pending).rejects.toThrow('changed my mind');
      expect(await pollValue(async () => ((await b.participants(name)) === 1 ? 1 : undefined), WAIT)).toBe(1);
      // y can still campaign afterwards.
      await x.resign();
      await y.campaign({ timeoutMs: WAIT });
      await Promise.all([x.close(), y.close()]);
    });

    it('a waiting campaign aborted with an Error, a string or no reason rejects with exactly that reason, and leaves nothing queued', async () => {
      const b = backend();
      const name = fresh();
      const [x, y] = [await b.make(name, 'x'), await b.make(name, 'y')];
      await x.campaign({ timeoutMs: WAIT });
      for (const abort of [(ac: AbortController) => ac.abort(new Error('mine')), (ac: AbortController) => ac.abort('mine'), (ac: AbortController) => ac.abort()]) {
        const ac = new AbortController();
        const pending = y.campaign({ signal: ac.signal });
        pending.catch(() => undefined);
        await new Promise((r) => setTimeout(r, 100));
        abort(ac);
        const error = await pending.then(
          () => 'resolved',
          (e: unknown) => e,
        );
        expect(error).toBe(ac.signal.reason);
      }
      expect(await pollValue(async () => ((await b.participants(name)) === 1 ? 1 : undefined), WAIT)).toBe(1);
      await Promise.all([x.close(), y.close()]);
    });

    it('after a loss from outside, the same object campaigns again and wins a term with a higher fence', async () => {
      const b = backend();
      const name = fresh();
      const x = await b.make(name, 'x');
      const first = await x.campaign({ timeoutMs: WAIT });
      await b.loseFromOutside(x, first);
      await aborted(first.signal);
      expect(first.lostReason).not.toBe('released');
      expect(x.term).toBeUndefined();
      const second = await x.campaign({ timeoutMs: WAIT });
      expect(second.signal.aborted).toBe(false);
      expect(second.fence).toBeGreaterThan(first.fence);
      expect((await x.leader())?.id).toBe('x');
      await x.close();
    });

    it('emits granted before campaign() resolves, then released on resign and lost on a loss from outside, once each, in that order', async () => {
      const b = backend();
      const name = fresh();
      const x = await b.make(name, 'x');
      const events: string[] = [];
      const leases: Lease[] = [];
      const emitter = x as unknown as EventEmitter<LeaseEvents>;
      expect(emitter).toBeInstanceOf(EventEmitter);
      emitter.on('granted', (lease) => {
        leases.push(lease);
        events.push(`granted ${leases.length}`);
      });
      emitter.on('released', (lease) => void events.push(`released ${leases.indexOf(lease) + 1}`));
      emitter.on('lost', (e, lease) => void events.push(`lost ${leases.indexOf(lease) + 1} ${e instanceof LeaseLostError && e.reason !== 'released'}`));
      const first = await x.campaign({ timeoutMs: WAIT });
      expect(events).toEqual(['granted 1']);
      expect(leases[0]).toBe(first);
      await x.resign();
      const second = await x.campaign({ timeoutMs: WAIT });
      await b.loseFromOutside(x, second);
      await aborted(second.signal);
      await pollValue(async () => (events.length >= 4 ? true : undefined), WAIT);
      await new Promise((r) => setTimeout(r, 200)); // nothing more comes
      expect(events).toEqual(['granted 1', 'released 1', 'granted 2', 'lost 2 true']);
      await x.close();
      expect(events).toHaveLength(4);
    });

    it('a leader whose term is ended from outside hears it no later than the next leader is elected', async () => {
      const b = backend();
      const name = fresh();
      const [x, y] = [await b.make(name, 'x'), await b.make(name, 'y')];
      const tx = await x.campaign({ timeoutMs: WAIT });
      let xHeard = Infinity;
      tx.signal.addEventListener('abort', () => (xHeard = performance.now()), { once: true });
      const elected = y.campaign({ timeoutMs: WAIT }).then((t) => ({ t, at: performance.now() }));
      await new Promise((r) => setTimeout(r, 200)); // y is queued
      await b.loseFromOutside(x, tx);
      const { at } = await elected;
      await aborted(tx.signal);
      expect(xHeard - at, `x heard ${Math.round(xHeard - at)} ms after y was elected`).toBeLessThanOrEqual(b.lossNoticeSlackMs ?? 0);
      await Promise.all([x.close(), y.close()]);
    });

    it('observe() shows the leader, then the failover to the next candidate when the leader loses its term', async () => {
      const b = backend();
      const name = fresh();
      const [watcher, x, y] = [await b.make(name, 'w'), await b.make(name, 'x'), await b.make(name, 'y')];
      const ac = new AbortController();
      const seen: (LeaderInfo | undefined)[] = [];
      const loop = (async () => {
        for await (const l of watcher.observe({ signal: ac.signal })) seen.push(l);
      })().catch(() => undefined);
      await pollValue(async () => (seen.length > 0 ? true : undefined), WAIT);
      expect(seen[0]).toBeUndefined();
      const tx = await x.campaign({ timeoutMs: WAIT });
      const py = y.campaign({ timeoutMs: WAIT });
      await pollValue(async () => (seen.some((l) => l?.id === 'x') ? true : undefined), WAIT);
      await b.loseFromOutside(x, tx);
      const ty = await py;
      await pollValue(async () => (seen.some((l) => l?.id === 'y') ? true : undefined), WAIT);
      ac.abort();
      await loop;
      const named = seen.filter((l): l is LeaderInfo => l !== undefined);
      expect(named.map((l) => l.id)).toEqual(['x', 'y']);
      expect(named.map((l) => l.fence)).toEqual([tx.fence, ty.fence]);
      await Promise.all([watcher.close(), x.close(), y.close()]);
    });

    it('close() aborts a campaign in flight with ClosedError, is idempotent, and refuses later use', async () => {
      const b = backend();
      const name = fresh();
      const [x, y] = [await b.make(name, 'x'), await b.make(name, 'y')];
      const tx = await x.campaign({ timeoutMs: WAIT });
      const pending = y.campaign();
      const refused = expect(pending).rejects.toBeInstanceOf(ClosedError);
      await new Promise((r) => setTimeout(r, 100));
      await y.close();
      await refused;
      await y.close();
      await expect(y.campaign()).rejects.toBeInstanceOf(ClosedError);
      await x.close();
      expect(tx.signal.aborted).toBe(true);
      expect(await pollValue(async () => ((await b.participants(name)) === 0 ? 0 : undefined), WAIT)).toBe(0);
    });

    if (features.queuesOnSession) {
      // A process resumed after a pause reads its socket before its timers run: a grant decided
      // on a reply read past the local deadline may be one the store has since given away.
      it('a grant read after the local deadline passed (on the injected clock) is not handed out: the campaign goes on to a live term', async () => {
        const b = backend();
        const name = fresh();
        let offset = 0;
        const clock: Clock = { now: () => performance.now() + offset };
        const x = await b.make(name, 'x');
        const y = await b.make(name, 'y', clock);
        const tx = await x.campaign({ timeoutMs: WAIT });
        const py = y.campaign({ timeoutMs: WAIT });
        expect(await pollValue(async () => ((await b.participants(name)) === 2 ? 2 : undefined), WAIT)).toBe(2);
        offset += b.ttlMs; // y's deadline has passed; its timers have not run yet
        await x.resign();
        const ty = await py;
        expect(ty.lost).toBe(false);
        expect(ty.fence).toBeGreaterThan(tx.fence);
        expect((await x.leader())?.id).toBe('y');
        await Promise.all([x.close(), y.close()]);
      });
    }

    it('a term ends at its local deadline on the injected clock, synchronously, when the clock steps past it', async () => {
      const b = backend();
      let offset = 0;
      const clock: Clock = { now: () => performance.now() + offset };
      const x = await b.make(fresh(), 'x', clock);
      const term = await x.campaign({ timeoutMs: WAIT });
      expect(term.lost).toBe(false);
      expect(term.remainingMs()).toBeGreaterThan(0);
      expect(term.remainingMs()).toBeLessThan(b.ttlMs);
      offset += b.ttlMs;
      expect(term.lost).toBe(true);
      expect(term.lostReason).toBe('deadline');
      expect(() => term.throwIfLost()).toThrow(expect.objectContaining({ code: 'LEASE_LOST', reason: 'deadline' }));
      await x.close();
    });

    it('releasing a term lost behind a blackholed link settles at once: the cleanup does not wait on the store', async () => {
      const b = backend();
      const proxy = await new FaultProxy({ target: { port: b.port() } }).start();
      const x = await b.makeThrough(fresh(), 'x', proxy.port);
      try {
        const term = await x.campaign({ timeoutMs: WAIT });
        proxy.blackhole();
        await aborted(term.signal); // its local deadline (ZooKeeper: the silent connection)
        expect(term.lostReason).not.toBe('released');
        const t0 = performance.now();
        expect(await settlesWithin(term.release(), LOST_RELEASE_BOUND_MS)).toBe('resolved');
        console.log(`[${kind}] release of a term lost behind a blackholed link: ${(performance.now() - t0).toFixed(1)} ms`);
        expect(await settlesWithin(x.resign(), LOST_RELEASE_BOUND_MS)).toBe('resolved');
        expect(x.term).toBeUndefined();
      } finally {
        await proxy.stop();
        await x.close().catch(() => undefined);
      }
    });

    it("leaving an await using block while the store is unreachable: the block's own error comes out, once the term's local deadline has passed", async () => {
      const b = backend();
      const proxy = await new FaultProxy({ target: { port: b.port() } }).start();
      const x = await b.makeThrough(fresh(), 'x', proxy.port);
      try {
        const mine = new Error('the block failed');
        let cutAt = 0;
        const block = async (): Promise<never> => {
          await using term = await x.campaign({ timeoutMs: WAIT });
          expect(term.lost).toBe(false);
          proxy.blackhole();
          cutAt = performance.now();
          throw mine;
        };
        const thrown = await block().catch((e: unknown) => e);
        const leftAfter = performance.now() - cutAt;
        console.log(`[${kind}] await using block left ${Math.round(leftAfter)} ms after the link went silent (TTL ${b.ttlMs} ms)`);
        expect(thrown).toBe(mine); // not a StoreUnavailableError, nor a SuppressedError wrapping it
        // The release waits on the store only while the term may still be live there: the block
        // is left by the local deadline (TTL − margin after the last refresh), well before the
        // store's call bound (callTimeoutMs, 5 s) would have given up.
        expect(leftAfter, `left the block ${Math.round(leftAfter)} ms after the link went silent`).toBeLessThan(b.ttlMs + 1000);
        expect(x.term).toBeUndefined();
      } finally {
        await proxy.stop();
        await x.close().catch(() => undefined);
      }
    });
  });
}
