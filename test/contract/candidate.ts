import { describe, expect, it } from 'vitest';
import { BusyError, ClosedError, type Candidate, type Clock, type LeaderInfo, type Lease } from '../../src/index.js';
import { pollValue } from '../helpers/wait.js';

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
}

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
  });
}
