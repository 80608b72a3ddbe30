import { describe, expect, it, vi } from 'vitest';
import { LeaseController } from '../../src/core/lease.js';
import { silentLogger } from '../../src/core/options.js';
import { LeaseLostError, type Clock, type Logger } from '../../src/index.js';

function manualClock(start = 0): Clock & { t: number } {
  const c = { t: start, now: () => c.t };
  return c;
}

/** 'resolved', 'rejected', or 'pending' when `p` has not settled after the I/O queued now. */
async function settled(p: Promise<unknown>): Promise<string> {
  return Promise.race([p.then(() => 'resolved', () => 'rejected'), new Promise<string>((r) => setImmediate(() => r('pending')))]);
}

describe('Lease', () => {
  it('exposes its fence and a live signal until something ends it', () => {
    const c = new LeaseController({ name: 'jobs', fence: 42n, release: async () => undefined });
    expect(c.lease.fence).toBe(42n);
    expect(c.lease.name).toBe('jobs');
    expect(c.lease.signal.aborted).toBe(false);
    expect(c.lease.lost).toBe(false);
    expect(c.lease.remainingMs()).toBe(Infinity);
    expect(() => c.lease.throwIfLost()).not.toThrow();
  });

  it('throwIfLost checks the local deadline synchronously on the monotonic clock', () => {
    const clock = manualClock(1000);
    const c = new LeaseController({ name: 'jobs', fence: 1n, clock, deadline: () => 1500, release: async () => undefined });
    expect(c.lease.remainingMs()).toBe(500);
    clock.t = 1499;
    expect(() => c.lease.throwIfLost()).not.toThrow();
    clock.t = 1500;
    expect(() => c.lease.throwIfLost()).toThrow(LeaseLostError);
    expect(c.lease.signal.aborted).toBe(true);
    expect((c.lease.signal.reason as LeaseLostError).reason).toBe('deadline');
    expect(c.lease.remainingMs()).toBe(0);
  });

  it('a session-extended deadline keeps the lease', () => {
    const clock = manualClock(0);
    let deadline = 100;
    const c = new LeaseController({ name: 'n', fence: 1n, clock, deadline: () => deadline, release: async () => undefined });
    clock.t = 90;
    deadline = 190; // a renewal was acknowledged
    clock.t = 150;
    expect(c.lease.lost).toBe(false);
  });

  it("aborts when the owning session's signal aborts, keeping the session's reason", () => {
    const session = new AbortController();
    const c = new LeaseController({ name: 'n', fence: 3n, parent: session.signal, release: async () => undefined });
    session.abort(new LeaseLostError('suspended'));
    expect(c.lease.signal.aborted).toBe(true);
    expect((c.lease.signal.reason as LeaseLostError).reason).toBe('suspended');
  });

  it('is born lost when its session already ended', () => {
    const session = new AbortController();
    session.abort(new Error('gone'));
    const c = new LeaseController({ name: 'n', fence: 3n, parent: session.signal, release: async () => undefined });
    expect(c.lease.lost).toBe(true);
    expect((c.lease.signal.reason as LeaseLostError).reason).toBe('session-lost');
  });

  it('release is idempotent, aborts the signal first and calls the store once', async () => {
    const store = vi.fn(async () => undefined);
    const c = new LeaseController({ name: 'n', fence: 1n, release: store });
    let abortedBeforeStore = false;
    store.mockImplementation(async () => {
      abortedBeforeStore = c.lease.signal.aborted;
    });
    await Promise.all([c.lease.release(), c.lease.release()]);
    await c.lease[Symbol.asyncDispose]();
    expect(store).toHaveBeenCalledTimes(1);
    expect(abortedBeforeStore).toBe(true);
    expect((c.lease.signal.reason as LeaseLostError).reason).toBe('released');
  });

  it('works with await using', async () => {
    const store = vi.fn(async () => undefined);
    {
      await using lease = new LeaseController({ name: 'n', fence: 1n, release: store }).lease;
      expect(lease.lost).toBe(false);
    }
    expect(store).toHaveBeenCalledTimes(1);
  });

  it('a store-side release failure rejects release()', async () => {
    const c = new LeaseController({ name: 'n', fence: 1n, release: () => Promise.reject(new Error('store down')) });
    await expect(c.lease.release()).rejects.toThrow('store down');
  });

  it('releasing a lease already lost, or past its local deadline, resolves at once; the cleanup runs in the background and its failure is logged', async () => {
    const never = (): Promise<void> => new Promise<void>(() => undefined);
    const lost = new LeaseController({ name: 'n', fence: 1n, release: vi.fn(never) });
    lost.lose('expired');
    expect(await settled(lost.lease.release())).toBe('resolved');
    const clock = manualClock(0);
    const store = vi.fn(() => Promise.reject(new Error('store down')));
    const warnings: unknown[] = [];
    const logger = { ...silentLogger(), warn: (o: unknown) => void warnings.push(o) } as Logger;
    const late = new LeaseController({ name: 'n', fence: 2n, clock, deadline: () => 100, release: store, logger });
    clock.t = 100; // past the deadline, not yet noticed by anything
    expect(await settled(late.lease.release())).toBe('resolved');
    expect(store).toHaveBeenCalledTimes(1); // the cleanup still runs
    expect(late.lease.lostReason).toBe('deadline');
    await new Promise((r) => setImmediate(r));
    expect(warnings).toEqual([expect.objectContaining({ fence: '2', err: expect.objectContaining({ message: 'store down' }) })]);
  });

  it('releasing a live lease waits for the store only until its local deadline passes or its session is lost', async () => {
    const never = (): Promise<void> => new Promise<void>(() => undefined);
    const t0 = performance.now();
    const timed = new LeaseController({ name: 'n', fence: 1n, deadline: () => t0 + 100, release: never });
    await timed.lease.release(); // resolves once the deadline has passed (would hang otherwise)
    expect(performance.now()).toBeGreaterThanOrEqual(t0 + 99);
    const session = new AbortController();
    const bound = new LeaseController({ name: 'n', fence: 2n, parent: session.signal, release: never });
    const p = bound.lease.release();
    expect(await settled(p)).toBe('pending');
    session.abort(new LeaseLostError('suspended'));
    expect(await settled(p)).toBe('resolved');
    const refused = new LeaseController({ name: 'n', fence: 3n, deadline: () => performance.now() + 60_000, release: () => Promise.reject(new Error('store down')) });
    await expect(refused.lease.release()).rejects.toThrow('store down'); // an answer before the deadline still counts
  });

  it('await using never throws a failed release over the block: it logs it, and the lease has ended', async () => {
    const warnings: unknown[] = [];
    const logger = { ...silentLogger(), warn: (o: unknown) => void warnings.push(o) } as Logger;
    const c = new LeaseController({ name: 'n', fence: 3n, release: () => Promise.reject(new Error('store down')), logger });
    const block = async (): Promise<string> => {
      await using lease = c.lease;
      expect(lease.lost).toBe(false);
      return 'result';
    };
    expect(await block()).toBe('result');
    expect(c.lease.signal.aborted).toBe(true);
    expect(warnings).toEqual([expect.objectContaining({ fence: '3', err: expect.objectContaining({ message: 'store down' }) })]);
    await expect(c.lease.release()).rejects.toThrow('store down'); // an explicit release still says so
  });

  it('the first loss wins; later ones do not rewrite the reason', () => {
    const c = new LeaseController({ name: 'n', fence: 1n, release: async () => undefined });
    c.lose('expired');
    c.lose('closed');
    expect((c.lease.signal.reason as LeaseLostError).reason).toBe('expired');
    expect((c.lease.signal.reason as LeaseLostError).fence).toBe(1n);
  });
});

describe('Lease signal made on first read', () => {
  it('a signal first read after the end is already aborted, with the reason and the fence of that end', () => {
    const released = new LeaseController({ name: 'jobs', fence: 7n, release: async () => undefined });
    void released.release();
    expect(released.lease.signal.aborted).toBe(true);
    const r = released.lease.signal.reason as LeaseLostError;
    expect(r).toBeInstanceOf(LeaseLostError);
    expect(r.reason).toBe('released');
    expect(r.fence).toBe(7n);
    expect(released.lease.signal).toBe(released.lease.signal); // one signal, whenever read

    const cause = new Error('link gone');
    const lost = new LeaseController({ name: 'jobs', fence: 8n, release: async () => undefined });
    lost.lose('expired', cause);
    expect(lost.lease.lostReason).toBe('expired');
    expect(() => lost.lease.throwIfLost()).toThrow(LeaseLostError);
    const e = lost.lease.signal.reason as LeaseLostError;
    expect(e.reason).toBe('expired');
    expect(e.cause).toBe(cause);
    let thrown: unknown;
    try {
      lost.lease.throwIfLost();
    } catch (x) {
      thrown = x;
    }
    expect(thrown).toBe(e); // the same error everywhere
  });

  it("onEnd callbacks run in order with the signal's listeners, whether the signal was made before, between or never", () => {
    const order: string[] = [];
    const never = new LeaseController({ name: 'a', fence: 1n, release: async () => undefined });
    never.onEnd(() => order.push(`hook sees aborted=${never.lease.signal.aborted}`));
    never.lose('expired');
    expect(order).toEqual(['hook sees aborted=true']);

    order.length = 0;
    const between = new LeaseController({ name: 'b', fence: 1n, release: async () => undefined });
    between.onEnd(() => order.push('hook 1'));
    between.lease.signal.addEventListener('abort', () => order.push('listener'));
    between.onEnd(() => order.push('hook 2'));
    between.lose('expired');
    expect(order).toEqual(['hook 1', 'listener', 'hook 2']);
  });

  it('a frozen object: its fields cannot be rewritten', () => {
    const c = new LeaseController({ name: 'jobs', fence: 3n, release: async () => undefined });
    expect(Object.isFrozen(c.lease)).toBe(true);
    expect(() => {
      (c.lease as { fence: bigint }).fence = 99n;
    }).toThrow(TypeError);
  });
});

describe('LeaseController validation', () => {
  const release = async (): Promise<void> => undefined;
  it.each<[string, Record<string, unknown>]>([
    ['name', { name: '', fence: 1n, release }],
    ['fence', { name: 'n', fence: 1, release }],
    ['release', { name: 'n', fence: 1n }],
    ['deadline', { name: 'n', fence: 1n, release, deadline: 5 }],
    ['parent', { name: 'n', fence: 1n, release, parent: {} }],
  ])('rejects a bad %s with ConfigError naming it', (field, init) => {
    expect(() => new LeaseController(init as never)).toThrow(expect.objectContaining({ code: 'CONFIG_INVALID', field }));
  });
});
