import { describe, expect, it } from 'vitest';
import { bindLeader, currentTerm, Leader, LeadershipManager, NOT_LEADER, NoTermError, NotLeaderError, StateError, TermEndedError, type DemotionInfo, type NotLeader, type TermContext } from '../../src/index.js';
import { spawnWorker } from '../../src/testing/index.js';
import { redisManagers } from '../helpers/managers.js';

/**
 * `@Leader()` in one process on a real Redis (issue 11): a decorated method runs only while its
 * manager leads, inside the term (`currentTerm()`), as work the drain waits for; a class-level
 * service gets the election's hooks. The multi-process guarantees are in leader-processes.test.ts.
 */
const kit = redisManagers();
let seq = 0;
const manager = (): LeadershipManager => kit.manager(`leader-${process.pid}-${++seq}`);

/** Reads the fence deep in the call tree, without it being passed down. */
const repository = { save: (): bigint => currentTerm().fence };

@Leader('reports')
class ReportService {
  readonly events: string[] = [];
  onElected(ctx: TermContext): void {
    this.events.push(`elected ${ctx.fence}`);
  }
  onDemoted(info: DemotionInfo): void {
    this.events.push(`demoted ${info.reason}`);
  }
  @Leader()
  async nightly(label: string): Promise<string> {
    return `${label}@${repository.save()}`;
  }
  @Leader({ whenNotLeader: 'throw' })
  async rebuild(): Promise<bigint> {
    return currentTerm().fence;
  }
  @Leader({ whenNotLeader: 'sentinel' })
  async flush(): Promise<void | NotLeader> {
    // returns nothing on the leader: the caller still tells a skipped call apart
  }
  @Leader()
  async long(ms: number, seen: { aborted?: boolean; endedAt?: number }): Promise<void> {
    const { signal } = currentTerm();
    await new Promise((r) => setTimeout(r, ms));
    seen.aborted = signal.aborted;
    seen.endedAt = performance.now();
  }
}

/** Only async methods can be leader-only: the decorated method returns a Promise. */
export class TypeCheck {
  // @ts-expect-error a synchronous method
  @Leader('x')
  sync(): number {
    return 1;
  }
}

/** A sentinel method must say so in its result type (the caller is meant to check for NOT_LEADER). */
export class SentinelTypeCheck {
  // @ts-expect-error the result type does not include NotLeader
  @Leader({ election: 'x', whenNotLeader: 'sentinel' })
  async count(): Promise<number> {
    return 1;
  }
  @Leader({ election: 'x', whenNotLeader: 'sentinel' })
  async total(): Promise<number | NotLeader> {
    return 1;
  }
}

class Jobs {
  @Leader({ election: 'cleanup', whenNotLeader: 'throw' })
  async sweep(): Promise<bigint> {
    return currentTerm().fence;
  }
}

describe('@Leader()', () => {
  it('runs the method only while leading, inside the term; skips, throws NotLeaderError or resolves NOT_LEADER otherwise; the class hooks follow the terms', async () => {
    const m = manager();
    const svc = new ReportService();
    bindLeader(svc, m);
    expect(await svc.nightly('x')).toBeUndefined(); // not leading: skipped
    await expect(svc.rebuild()).rejects.toBeInstanceOf(NotLeaderError);
    expect(await svc.flush()).toBe(NOT_LEADER); // not leading, and the caller can tell
    m.start();
    const term = await m.whenElected({ timeoutMs: 10_000 });
    expect(await svc.nightly('x')).toBe(`x@${term.fence}`);
    expect(await svc.rebuild()).toBe(term.fence);
    expect(await svc.flush()).toBeUndefined(); // ran on the leader and returned nothing
    await m.resign({ cooldownMs: 60_000 });
    expect(await svc.nightly('x')).toBeUndefined();
    expect(await svc.flush()).toBe(NOT_LEADER);
    expect(svc.events).toEqual([`elected ${term.fence}`, 'demoted resigned']);
    await m.close();
  });

  it("an in-flight call is work of the term: its signal aborts on demotion and the drain waits for it before the lease goes", async () => {
    const m = manager();
    const svc = new ReportService();
    bindLeader(svc, m);
    m.start();
    await m.whenElected({ timeoutMs: 10_000 });
    const seen: { aborted?: boolean; endedAt?: number } = {};
    const call = svc.long(300, seen);
    await new Promise((r) => setTimeout(r, 50));
    let demotedAt = 0;
    m.onDemoted(() => void (demotedAt = performance.now()));
    await m.resign();
    await call;
    expect(seen.aborted).toBe(true);
    expect(demotedAt).toBeGreaterThanOrEqual(seen.endedAt!);
    await m.close();
  });

  it('a method names its own election; bindLeader maps names to managers and refuses a missing one', async () => {
    const m = manager();
    const jobs = new Jobs();
    expect(() => bindLeader(jobs, { other: m })).toThrow(expect.objectContaining({ field: 'managers' }));
    bindLeader(jobs, { cleanup: m });
    m.start();
    const term = await m.whenElected({ timeoutMs: 10_000 });
    expect(await jobs.sweep()).toBe(term.fence);
    await m.close();
    await expect(new Jobs().sweep()).rejects.toBeInstanceOf(StateError); // never bound
  });

  it('a service bound while its manager already leads gets onElected for the running term', async () => {
    const m = manager();
    m.start();
    const term = await m.whenElected({ timeoutMs: 10_000 });
    const svc = new ReportService();
    bindLeader(svc, m);
    await new Promise((r) => setTimeout(r, 20));
    expect(svc.events).toEqual([`elected ${term.fence}`]);
    await m.close();
  });

  it('currentTerm() outside a term throws NoTermError (code NO_TERM); inside onElected and tracked work it is the term', async () => {
    expect(() => currentTerm()).toThrow(NoTermError);
    expect(() => currentTerm()).toThrow(expect.objectContaining({ code: 'NO_TERM' }));
    const m = manager();
    const inHook = new Promise<bigint>((r) => m.onElected(() => r(currentTerm().fence)));
    m.start();
    const term = await m.whenElected({ timeoutMs: 10_000 });
    expect(await inHook).toBe(term.fence);
    expect(await m.track(async () => currentTerm().fence)).toBe(term.fence);
    await m.close();
    expect((term.signal.reason as TermEndedError).reason).toBe('closed');
  });

  it('works compiled as TC39 decorators too (experimentalDecorators off)', async () => {
    const dir = new URL('./fixtures/tc39/', import.meta.url).pathname;
    const w = await spawnWorker(`${dir}service.ts`, [], { env: { TSX_TSCONFIG_PATH: `${dir}tsconfig.json`, PLAN: JSON.stringify({ port: kit.port(), name: `tc39-${process.pid}` }) } });
    try {
      const r = await w.waitFor('result', { timeoutMs: 20_000 });
      expect(r.data).toEqual({ mode: 'tc39', skipped: true, threw: 'NOT_LEADER', sentinel: true, fence: r.data.term, term: r.data.term, elected: r.data.term });
    } finally {
      await w.kill();
    }
  });
});
