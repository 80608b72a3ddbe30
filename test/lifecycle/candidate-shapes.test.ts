import { describe, expect, it } from 'vitest';
import { LeaseController } from '../../src/core/lease.js';
import { ClosedError, LeadershipManager, type Candidate, type LeaderInfo, type Lease, type WaitOptions } from '../../src/index.js';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { pollValue, settlesWithin } from '../helpers/wait.js';

/**
 * The manager's own logic (not a backend's) with Candidates written the way a user might write
 * one, in process: an `observe()` that ends without an error, a `resign()` that waits on a store
 * it cannot reach. The manager knows only `Candidate`, so it must cope with both.
 */

/** Resolves when `signal` aborts, rejecting with its reason (how a campaign that never wins ends). */
const untilAborted = (signal: AbortSignal | undefined): Promise<never> =>
  new Promise((_, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    signal?.addEventListener('abort', () => reject(signal.reason), { once: true });
  });

/** A hand-written Candidate: `campaign()` hands out the leases it is given, then waits for good. */
class HandWritten implements Candidate {
  readonly id = 'hand-written';
  readonly name = 'hand-written';
  term: Lease | undefined;
  campaigns = 0;
  observes = 0;
  /** Leases to hand out, in order; once empty, a campaign waits until aborted. */
  readonly grants: Lease[] = [];
  /** What `resign()` waits for (a store it cannot reach, until the test says so). */
  resignGate: Promise<void> = Promise.resolve();
  readonly #closing = new AbortController();

  async campaign(options: WaitOptions = {}): Promise<Lease> {
    this.campaigns++;
    const next = this.grants.shift();
    if (next) return (this.term = next);
    return untilAborted(options.signal ? AbortSignal.any([options.signal, this.#closing.signal]) : this.#closing.signal);
  }

  async resign(): Promise<void> {
    const t = this.term;
    this.term = undefined;
    await this.resignGate;
    await t?.release();
  }

  async leader(): Promise<LeaderInfo | undefined> {
    return this.term ? { id: this.id, fence: this.term.fence } : undefined;
  }

  // Ends at once, without an error and without yielding. For the first calls, with no I/O at all:
  // the manager's loop spun on microtasks and starved the event loop (timers never ran again);
  // after those, one turn of the event loop per call, so a spinning manager shows as a count
  // instead of a hung test.
  // eslint-disable-next-line require-yield -- it ends without yielding, on purpose
  async *observe(): AsyncGenerator<LeaderInfo | undefined, void, undefined> {
    if (++this.observes > 200) await new Promise((r) => setImmediate(r));
  }

  async close(): Promise<void> {
    this.#closing.abort(new ClosedError('hand-written candidate'));
    await this.resign();
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }
}

describe('LeadershipManager with a hand-written Candidate', () => {
  it("observe() that ends without an error is re-entered after the manager's backoff, not at once, and close() resolves", async () => {
    const c = new HandWritten();
    const m = new LeadershipManager(c, { backoff: { initialMs: 50, maxMs: 200 } });
    m.start();
    await new Promise((r) => setTimeout(r, 1000));
    const seen = c.observes;
    // 1 s of backoff from 50 ms up to 200 ms (jittered): a handful of re-entries, not thousands.
    expect(seen, `observe() entered ${seen} times in 1 s`).toBeGreaterThanOrEqual(1);
    expect(seen, `observe() entered ${seen} times in 1 s`).toBeLessThanOrEqual(40);
    expect(await settlesWithin(m.close(), 5000)).toBe('resolved');
    expect(m.state).toBe('closed');
  });

  it("a lost term's onDemoted runs right after the drain, without waiting for a resign stuck on the store; the next campaign waits for it", async () => {
    const c = new HandWritten();
    const ctl = new LeaseController({ name: c.name, fence: 7n, release: async () => undefined });
    c.grants.push(ctl.lease);
    let openGate!: () => void;
    c.resignGate = new Promise<void>((r) => (openGate = r));
    const m = new LeadershipManager(c, { observeLeader: false, backoff: { initialMs: 10, maxMs: 20 } });
    const demoted: string[] = [];
    m.onDemoted((info) => void demoted.push(`${info.reason}/${info.lostReason}`));
    m.start();
    const term = await m.whenElected({ timeoutMs: 5000 });
    expect(term.fence).toBe(7n);
    ctl.lose('expired'); // the store ended the lease
    await pollValue(async () => (demoted.length > 0 ? true : undefined), 5000);
    expect(demoted).toEqual(['lost/expired']);
    expect(m.state).toBe('follower');
    await new Promise((r) => setTimeout(r, 200));
    expect(c.campaigns).toBe(1); // not campaigning again while the resign is still going
    openGate();
    await pollValue(async () => (c.campaigns === 2 ? true : undefined), 5000);
    await m.close();
  });

  it("a resigned term's onDemoted still comes after the release", async () => {
    const c = new HandWritten();
    let released = false;
    const ctl = new LeaseController({ name: c.name, fence: 8n, release: async () => void (released = true) });
    c.grants.push(ctl.lease);
    const m = new LeadershipManager(c, { observeLeader: false });
    let releasedAtDemotion: boolean | undefined;
    m.onDemoted(() => void (releasedAtDemotion = released));
    m.start();
    await m.whenElected({ timeoutMs: 5000 });
    await m.resign({ cooldownMs: 60_000 });
    expect(releasedAtDemotion).toBe(true);
    await m.close();
  });
});

describe("the manager's logger", () => {
  it("an application's pino logger keeps its own name: the manager binds component, election and id", async () => {
    const lines: string[] = [];
    const logger = pino({ name: 'app', level: 'debug' }, new Writable({ write: (c: Buffer, _e, cb) => (lines.push(c.toString()), cb()) }));
    const m = new LeadershipManager(new HandWritten(), { logger, observeLeader: false });
    m.start();
    await pollValue(async () => lines.find((l) => l.includes('leadership state')));
    await m.close();
    for (const l of lines) expect(l.match(/"name":/g), l).toHaveLength(1);
    expect(JSON.parse(lines[0]!)).toMatchObject({ name: 'app', component: 'leadership', election: 'hand-written', id: 'hand-written' });
  });
});
