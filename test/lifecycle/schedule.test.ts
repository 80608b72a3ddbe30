import { describe, expect, it } from 'vitest';
import { currentTerm, LeadershipManager, TermEndedError, type ScheduledRun } from '../../src/index.js';
import { redisManagers } from '../helpers/managers.js';
import { pollValue } from '../helpers/wait.js';

/**
 * Leader-only timers (issue 11) on a real Redis: `every()` and `cron()` run only while their
 * manager leads, never overlap, abort the running run on demotion and start no further run, and
 * a new term resumes the schedule without a burst of missed runs.
 */
const kit = redisManagers();
let seq = 0;
function managers(n: number): LeadershipManager[] {
  const name = `sched-${process.pid}-${++seq}`;
  return Array.from({ length: n }, (_, i) => kit.manager(name, `m${i}`));
}

/** Wall-clock ms: cron ticks and `scheduledAt` are calendar times (no lease math here). */
const wallNow = (): number => new Date().getTime();

type Rec = { who: string; start: number; end: number; fence: bigint; scheduledAt: Date; aborted: boolean };
/** A timer function that records its runs and takes `ms` (ending early when its signal aborts). */
function recorder(who: string, ms: number, log: Rec[]) {
  return async ({ signal, fence, scheduledAt }: ScheduledRun): Promise<void> => {
    const r: Rec = { who, start: performance.now(), end: 0, fence, scheduledAt, aborted: false };
    log.push(r);
    expect(currentTerm().fence).toBe(fence); // the run is inside its term
    await new Promise<void>((resolve) => {
      const t = setTimeout(resolve, ms);
      signal.addEventListener('abort', () => (clearTimeout(t), (r.aborted = true), resolve()), { once: true });
    });
    r.end = performance.now();
  };
}

describe('manager.every()', () => {
  it('runs only while leading, never overlaps a run that outlasts the interval, aborts the running run on demotion, and resumes the next term on its beat', async () => {
    const [a, b] = managers(2) as [LeadershipManager, LeadershipManager];
    const log: Rec[] = [];
    a.every(100, recorder('a', 150, log));
    b.every(100, recorder('b', 150, log));
    const electedAt = new Map<bigint, number>(); // stamped when the term begins, before any run
    a.on('elected', (ctx) => void electedAt.set(ctx.fence, performance.now()));
    a.start();
    const t1 = await a.whenElected({ timeoutMs: 10_000 });
    b.start();
    await pollValue(async () => (log.filter((r) => r.who === 'a' && r.end > 0).length >= 3 ? true : undefined), 10_000);
    // Runs of 150 ms on a 100 ms beat: each starts after the previous ended.
    for (let i = 1; i < log.length; i++) expect(log[i]!.start).toBeGreaterThanOrEqual(log[i - 1]!.end);
    const running = await pollValue(async () => (log.at(-1)!.end === 0 ? log.at(-1) : undefined), 10_000);
    await a.resign({ cooldownMs: 1500 }); // b leads next; a campaigns again after b has run
    const resignedAt = performance.now();
    expect(t1.signal.reason).toBeInstanceOf(TermEndedError);
    const aRuns = log.filter((r) => r.who === 'a');
    expect(running.aborted).toBe(true); // the in-flight run saw its signal abort, and the drain waited for it
    expect(running.end).toBeGreaterThan(0);
    await b.whenElected({ timeoutMs: 10_000 });
    await pollValue(async () => (log.filter((r) => r.who === 'b' && r.end > 0).length >= 2 ? true : undefined), 10_000);
    expect(log.filter((r) => r.who === 'a').length).toBe(aRuns.length); // no run of a after its demotion
    for (const r of log.filter((x) => x.who === 'b')) expect(r.start).toBeGreaterThan(resignedAt - 1);
    await b.close();
    // a's next term: resumes on the beat, no burst of the runs it missed.
    const t2 = await a.whenElected({ timeoutMs: 10_000 });
    await pollValue(async () => (log.filter((r) => r.who === 'a' && r.fence === t2.fence && r.end > 0).length >= 2 ? true : undefined), 10_000);
    const now = performance.now();
    const newRuns = log.filter((r) => r.fence === t2.fence);
    expect(newRuns.length).toBeLessThanOrEqual(Math.floor((now - electedAt.get(t2.fence)!) / 100) + 1);
    expect(new Set(newRuns.map((r) => r.scheduledAt.getTime())).size).toBe(newRuns.length);
    await a.close();
  });

  it('a run that throws is reported on the error event and the timer goes on; stop() starts no further run', async () => {
    const [m] = managers(1) as [LeadershipManager];
    const errors: unknown[] = [];
    m.on('error', (e) => errors.push(e));
    let runs = 0;
    const timer = m.every(50, () => {
      runs++;
      if (runs === 1) throw new Error('first run fails');
    });
    m.start();
    const term = await m.whenElected({ timeoutMs: 10_000 });
    await pollValue(async () => (runs >= 3 ? true : undefined), 10_000);
    expect(errors).toHaveLength(1);
    expect((errors[0] as Error).message).toBe('first run fails');
    expect(term.signal.aborted).toBe(false); // a failed run does not end the term
    timer.stop();
    const stoppedAt = runs;
    await new Promise((r) => setTimeout(r, 200));
    expect(runs).toBeLessThanOrEqual(stoppedAt + 1);
    await m.close();
  });

  it('a timer made while leading starts in the current term', async () => {
    const [m] = managers(1) as [LeadershipManager];
    m.start();
    const term = await m.whenElected({ timeoutMs: 10_000 });
    const fences: bigint[] = [];
    m.every(30, ({ fence }) => void fences.push(fence));
    await pollValue(async () => (fences.length >= 2 ? true : undefined), 10_000);
    expect(fences.every((f) => f === term.fence)).toBe(true);
    await m.close();
  });
});

describe('manager.cron()', () => {
  it('fires on each tick while leading; on a handover mid-run the run aborts and the successor takes the next tick: each tick runs at most once, at most the one in flight is lost', async () => {
    const [a, b] = managers(2) as [LeadershipManager, LeadershipManager];
    const log: Rec[] = [];
    a.cron('* * * * * *', recorder('a', 400, log));
    b.cron('* * * * * *', recorder('b', 400, log));
    a.start();
    await a.whenElected({ timeoutMs: 10_000 });
    b.start();
    await pollValue(async () => (log.filter((r) => r.who === 'a').length >= 2 ? true : undefined), 10_000);
    await new Promise((r) => setTimeout(r, 100)); // mid-run
    await a.resign({ cooldownMs: 60_000 });
    await pollValue(async () => (log.filter((r) => r.who === 'b' && r.end > 0).length >= 2 ? true : undefined), 10_000);
    await Promise.all([a.close(), b.close()]);
    const ticks = log.map((r) => r.scheduledAt.getTime());
    expect(new Set(ticks).size).toBe(ticks.length); // never twice for one tick
    for (const t of ticks) expect(t % 1000).toBe(0);
    expect(log.filter((r) => r.who === 'a').at(-1)!.aborted).toBe(true);
    const sorted = [...ticks].sort((x, y) => x - y);
    const missed = (sorted.at(-1)! - sorted[0]!) / 1000 + 1 - sorted.length;
    expect(missed).toBeLessThanOrEqual(1);
  });

  it('catchUpMs: a tick that fell in the gap before a term runs once at its start (the latest one, no burst), then the schedule goes on', async () => {
    const [a, b] = managers(2) as [LeadershipManager, LeadershipManager];
    const log: Rec[] = [];
    a.cron('* * * * * *', recorder('a', 50, log), { catchUpMs: 10_000 });
    // The wall time of b's election, bracketed by two 'elected' listeners around the schedule's
    // own (listeners run in order, and the schedule picks the tick it missed synchronously in
    // its own): a time read after whenElected() resolves can be a tick later on a loaded machine.
    let electedFrom = 0;
    let electedTo = 0;
    b.on('elected', () => void (electedFrom ||= wallNow()));
    b.cron('* * * * * *', recorder('b', 50, log), { catchUpMs: 10_000 });
    b.on('elected', () => void (electedTo ||= wallNow()));
    a.start();
    await a.whenElected({ timeoutMs: 10_000 });
    await pollValue(async () => (log.some((r) => r.who === 'a' && r.end > 0) ? true : undefined), 10_000);
    // Nobody leads for 2.5 s (as after a crash, for the TTL): ticks come due and nobody runs them.
    await a.resign({ cooldownMs: 60_000 });
    const gapStart = new Date().getTime();
    await new Promise((r) => setTimeout(r, 2500));
    b.start();
    const term = await b.whenElected({ timeoutMs: 10_000 });
    await pollValue(async () => (log.filter((r) => r.who === 'b' && r.end > 0).length >= 3 ? true : undefined), 10_000);
    await Promise.all([a.close(), b.close()]);
    const first = log.find((r) => r.who === 'b')!;
    // The first run of b's term is the latest tick before its election, run at once: no tick
    // falls between it and the election.
    expect(first.scheduledAt.getTime()).toBeGreaterThan(gapStart);
    expect(first.scheduledAt.getTime()).toBeLessThanOrEqual(electedTo);
    expect(first.scheduledAt.getTime()).toBeGreaterThan(electedFrom - 1000);
    expect(first.fence).toBe(term.fence);
    // Only that one: the gap's earlier ticks are not made up (they would come first, or out of
    // order), and after it the schedule goes on forward; no tick runs twice.
    const bTicks = log.filter((r) => r.who === 'b').map((r) => r.scheduledAt.getTime());
    for (let i = 1; i < bTicks.length; i++) expect(bTicks[i]!).toBeGreaterThan(bTicks[i - 1]!);
    const ticks = log.map((r) => r.scheduledAt.getTime());
    expect(new Set(ticks).size).toBe(ticks.length);
  });

  it('catchUpMs: a tick that comes due while the catch-up run is still going runs right after it (coalesced), so the failover loses no tick after the one caught up', async () => {
    const [a, b] = managers(2) as [LeadershipManager, LeadershipManager];
    type Run = { scheduledAt: number; startWall: number; endWall: number; fence: bigint };
    const runs: Run[] = [];
    a.cron('* * * * * *', () => undefined, { catchUpMs: 10_000 });
    b.cron(
      '* * * * * *',
      async ({ scheduledAt, fence, signal }) => {
        const r: Run = { scheduledAt: scheduledAt.getTime(), startWall: wallNow(), endWall: 0, fence };
        runs.push(r);
        // The first run (the catch-up) lasts until half-way between two ticks at least one tick
        // later: exactly one tick comes due during it, and it ends far from any tick.
        const until = runs.length === 1 ? Math.floor(r.startWall / 1000) * 1000 + 1500 : r.startWall + 50;
        await new Promise<void>((resolve) => {
          const t = setTimeout(resolve, until - wallNow());
          signal.addEventListener('abort', () => (clearTimeout(t), resolve()), { once: true });
        });
        r.endWall = wallNow();
      },
      { catchUpMs: 10_000 },
    );
    a.start();
    await a.whenElected({ timeoutMs: 10_000 });
    // Nobody leads for 1.5 s (as after a crash, for the TTL): ticks come due and nobody runs them.
    await a.resign({ cooldownMs: 60_000 });
    await new Promise((r) => setTimeout(r, 1500));
    b.start();
    const term = await b.whenElected({ timeoutMs: 10_000 });
    await pollValue(async () => (runs.length >= 3 && runs[2]!.endWall > 0 ? true : undefined), 10_000);
    await Promise.all([a.close(), b.close()]);
    const [first, second, third] = runs as [Run, Run, Run];
    expect([first.fence, second.fence, third.fence]).toEqual([term.fence, term.fence, term.fence]);
    expect(first.scheduledAt).toBeLessThanOrEqual(first.startWall); // the catch-up: a tick already due
    // The tick that came due during the catch-up run ran right after it, not the one after.
    expect(second.scheduledAt).toBeGreaterThan(first.scheduledAt);
    expect(second.scheduledAt, 'the second run is the tick that came due during the first').toBeLessThan(first.endWall);
    expect(second.startWall).toBeGreaterThanOrEqual(first.endWall); // after it, never overlapping
    // And the schedule goes on from there: no tick lost after the caught-up one.
    expect(third.scheduledAt).toBe(second.scheduledAt + 1000);
  });

  it('takes a time zone for the expression', async () => {
    const [m] = managers(1) as [LeadershipManager];
    const at: Date[] = [];
    m.cron('* * * * * *', ({ scheduledAt }) => void at.push(scheduledAt), { timezone: 'Asia/Kolkata' });
    m.start();
    await pollValue(async () => (at.length >= 1 ? true : undefined), 10_000);
    await m.close();
    expect(at[0]!.getMilliseconds()).toBe(0);
  });
});
