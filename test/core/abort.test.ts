import { describe, expect, it } from 'vitest';
import { atMostMs, joinSignals, onAbort, raceSignal, raceTimeout, sleep, sleepQuietly, waitScope, whenAborted } from '../../src/core/abort.js';
import { inWindow, JOINS_IN_FLIGHT } from '../../src/core/window.js';
import { AcquireTimeoutError, ConfigError } from '../../src/core/errors.js';

describe('abort helpers', () => {
  it('sleep rejects with the signal reason, at once when already aborted', async () => {
    const c = new AbortController();
    c.abort(new Error('stop'));
    await expect(sleep(10_000, c.signal)).rejects.toThrow('stop');
    const c2 = new AbortController();
    const p = sleep(10_000, c2.signal);
    c2.abort(new Error('later'));
    await expect(p).rejects.toThrow('later');
    // Exactly the reason, whatever it is — never the timer's own AbortError around it.
    const reason = new Error('exact');
    const c3 = new AbortController();
    const p3 = sleep(10_000, c3.signal);
    c3.abort(reason);
    await expect(p3).rejects.toBe(reason);
    const c4 = new AbortController();
    const p4 = sleep(10_000, c4.signal);
    c4.abort('a string');
    await expect(p4).rejects.toBe('a string');
    const c5 = new AbortController();
    const p5 = sleep(10_000, c5.signal);
    c5.abort();
    await expect(p5).rejects.toBe(c5.signal.reason);
    // A delay past Node's timer limit waits (clamped) instead of firing at once.
    const c6 = new AbortController();
    const p6 = sleep(2 ** 40, c6.signal);
    const early = await Promise.race([p6.then(() => 'fired'), new Promise((r) => setTimeout(() => r('waiting'), 50))]);
    expect(early).toBe('waiting');
    c6.abort('done');
    await expect(p6).rejects.toBe('done');
    expect(await sleepQuietly(10_000, AbortSignal.abort('x'))).toBeUndefined();
  });

  it('joinSignals aborts with the first reason of its own signal, the shared one or its abort(); an aborted source aborts it at once; dispose unhooks both', () => {
    for (const which of ['own', 'shared', 'abort'] as const) {
      const own = new AbortController();
      const shared = new AbortController();
      const j = joinSignals(own.signal, shared.signal);
      expect(j.signal.aborted).toBe(false);
      if (which === 'own') own.abort('own');
      if (which === 'shared') shared.abort('shared');
      if (which === 'abort') j.abort('abort');
      own.abort('later');
      shared.abort('later');
      expect(j.signal.reason).toBe(which);
      j.dispose();
    }
    const early = new AbortController();
    early.abort('early');
    expect(joinSignals(new AbortController().signal, early.signal).signal.reason).toBe('early');
    const own = new AbortController();
    const shared = new AbortController();
    const j = joinSignals(own.signal, shared.signal);
    j.dispose();
    own.abort('x');
    shared.abort('y');
    expect(j.signal.aborted).toBe(false);
  });

  it('raceSignal settles with the promise or rejects with the reason', async () => {
    await expect(raceSignal(Promise.resolve(1), new AbortController().signal)).resolves.toBe(1);
    const c = new AbortController();
    const p = raceSignal(new Promise(() => undefined), c.signal);
    c.abort(new Error('cancelled'));
    await expect(p).rejects.toThrow('cancelled');
  });

  it('raceSignal with two signals rejects with the reason of the one that aborts; either aborted before the race rejects at once', async () => {
    const wait = new AbortController();
    const session = new AbortController();
    const p = raceSignal(new Promise(() => undefined), wait.signal, session.signal);
    session.abort(new Error('session ended'));
    await expect(p).rejects.toThrow('session ended');
    // Settled: a later abort of the other signal is harmless, and its other subscribers still hear it.
    let heard = 0;
    onAbort(wait.signal, () => heard++);
    wait.abort(new Error('late'));
    expect(heard).toBe(1);
    // Aborted before the race: rejects at once with that reason, the promise's rejection handled.
    await expect(raceSignal(Promise.reject(new Error('ignored')), undefined, session.signal)).rejects.toThrow('session ended');
    // Settled by the promise first: resolves, and an abort after it changes nothing.
    const a = new AbortController();
    const b = new AbortController();
    await expect(raceSignal(Promise.resolve(7), a.signal, b.signal)).resolves.toBe(7);
    a.abort(new Error('after'));
    b.abort(new Error('after'));
  });

  it('waitScope turns a timeout into AcquireTimeoutError', async () => {
    const scope = waitScope('acquire', { timeoutMs: 10 });
    const reason = await whenAborted(scope.signal);
    scope.dispose();
    expect(reason).toBeInstanceOf(AcquireTimeoutError);
    expect((reason as AcquireTimeoutError).timeoutMs).toBe(10);
  });

  it("waitScope follows the caller's signal and validates its inputs", () => {
    const c = new AbortController();
    const scope = waitScope('campaign', { signal: c.signal });
    c.abort(new Error('user'));
    expect(scope.signal.reason).toEqual(new Error('user'));
    scope.dispose();
    expect(() => waitScope('x', { timeoutMs: -1 })).toThrow(ConfigError);
    expect(() => waitScope('x', { signal: {} as AbortSignal })).toThrow(ConfigError);
  });
  it('raceTimeout: bounds of one length fire in order and never early, settled ones never, and an idle bound keeps no timer referenced', async () => {
    const never = new Promise<never>(() => undefined);
    const fired: number[] = [];
    const t0 = performance.now();
    const bounds = [0, 1, 2, 3].map((i) =>
      raceTimeout(i === 1 ? Promise.resolve('answered') : never, 150, () => new Error(`bound ${i}`)).then(
        (v) => v,
        (e: Error) => {
          fired.push(i);
          expect(performance.now() - t0).toBeGreaterThanOrEqual(150);
          return e.message;
        },
      ),
    );
    const abort = new AbortController();
    const aborted = raceTimeout(never, 150, () => new Error('bound')).catch((e: unknown) => e);
    const stopped = raceTimeout(never, 150, () => new Error('not this'), abort.signal).catch((e: unknown) => e);
    abort.abort(new Error('reason'));
    expect(await Promise.all(bounds)).toEqual(['bound 0', 'answered', 'bound 2', 'bound 3']);
    expect(fired).toEqual([0, 2, 3]);
    expect(((await aborted) as Error).message).toBe('bound');
    expect(((await stopped) as Error).message).toBe('reason');
    // Settled before its bound: the shared timer stays armed but no longer holds the process.
    const timersBefore = process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;
    await raceTimeout(Promise.resolve(1), 60_000, () => new Error('x'));
    expect(process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length).toBe(timersBefore);
    let answer!: (v: number) => void;
    const pending = raceTimeout(new Promise<number>((r) => (answer = r)), 60_000, () => new Error('x'));
    expect(process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length).toBe(timersBefore + 1);
    answer(2);
    expect(await pending).toBe(2);
    expect(process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length).toBe(timersBefore);
  });

  it('onAbort: thousands of subscribers on one signal through one listener, each called once; an unsubscribed one not at all', () => {
    const c = new AbortController();
    let added = 0;
    const add = c.signal.addEventListener.bind(c.signal);
    c.signal.addEventListener = ((...args: Parameters<typeof add>) => {
      added++;
      return add(...args);
    }) as typeof add;
    const calls = new Array<number>(10_000).fill(0);
    const offs = calls.map((_, i) => onAbort(c.signal, () => calls[i]!++));
    offs[7]!();
    c.abort();
    c.abort();
    expect(added).toBe(1);
    expect(calls.filter((n) => n === 1).length).toBe(9_999);
    expect(calls[7]).toBe(0);
  });

  it('inWindow: at most JOINS_IN_FLIGHT at once per owner, the rest in order; a wait ends with its signal', async () => {
    const owner = {};
    let running = 0;
    let most = 0;
    const order: number[] = [];
    const gates: (() => void)[] = [];
    const job = (i: number) => () =>
      new Promise<void>((resolve) => {
        running++;
        most = Math.max(most, running);
        order.push(i);
        gates.push(() => {
          running--;
          resolve();
        });
      });
    const all = Array.from({ length: JOINS_IN_FLIGHT + 5 }, (_, i) => inWindow(owner, undefined, job(i)));
    await new Promise((r) => setImmediate(r));
    expect(running).toBe(JOINS_IN_FLIGHT);
    const c = new AbortController();
    const given = inWindow(owner, c.signal, job(-1));
    c.abort(new Error('gave up'));
    await expect(given).rejects.toThrow('gave up');
    while (gates.length > 0) {
      gates.shift()!();
      await new Promise((r) => setImmediate(r));
    }
    await Promise.all(all);
    expect(most).toBe(JOINS_IN_FLIGHT);
    expect(order).toEqual(Array.from({ length: JOINS_IN_FLIGHT + 5 }, (_, i) => i));
    await inWindow({}, undefined, async () => undefined); // another owner: its own window
  });
  it('inWindow hands back the value or the error of its job, and a failed job frees its slot', async () => {
    const owner = {};
    await expect(inWindow(owner, undefined, async () => 7)).resolves.toBe(7);
    const boom = new Error('boom');
    for (let i = 0; i < JOINS_IN_FLIGHT + 1; i++) await expect(inWindow(owner, undefined, () => Promise.reject(boom))).rejects.toBe(boom);
    const thrown = new Error('sync');
    await expect(
      inWindow(owner, undefined, () => {
        throw thrown;
      }),
    ).rejects.toBe(thrown);
    // Every slot came back: a full window of jobs still runs at once.
    let running = 0;
    const gates: (() => void)[] = [];
    const all = Array.from({ length: JOINS_IN_FLIGHT }, () => inWindow(owner, undefined, () => new Promise<void>((r) => (running++, gates.push(r)))));
    await new Promise((r) => setImmediate(r));
    expect(running).toBe(JOINS_IN_FLIGHT);
    for (const g of gates) g();
    await Promise.all(all);
  });

  it('atMostMs fires no earlier than 7/8 of its delay, never once cancelled, and soon for no delay', async () => {
    const t0 = performance.now();
    const late = await new Promise<number>((r) => atMostMs(203.7, () => r(performance.now() - t0)));
    expect(late).toBeGreaterThanOrEqual((203.7 * 7) / 8);
    let cancelledFired = false;
    const cancel = atMostMs(40, () => (cancelledFired = true));
    cancel();
    await new Promise<void>((r) => atMostMs(0, r));
    await new Promise<void>((r) => atMostMs(-5, r));
    await new Promise<void>((r) => atMostMs(Number.NaN, r));
    await new Promise((r) => setTimeout(r, 80));
    expect(cancelledFired).toBe(false);
  });
  it('raceTimeout with mapError: the value passes as it is, every rejection (call, timeout, signal) settles as mapError says', async () => {
    const seen: unknown[] = [];
    const map = (e: unknown): Promise<never> => {
      seen.push(e);
      return Promise.reject(new Error(`mapped: ${String(e instanceof Error ? e.message : e)}`));
    };
    await expect(raceTimeout(Promise.resolve(5), 1000, () => new Error('late'), undefined, map)).resolves.toBe(5);
    await expect(raceTimeout(Promise.reject(new Error('refused')), 1000, () => new Error('late'), undefined, map)).rejects.toThrow('mapped: refused');
    await expect(raceTimeout(new Promise<never>(() => undefined), 10, () => new Error('late'), undefined, map)).rejects.toThrow('mapped: late');
    const c = new AbortController();
    const p = raceTimeout(new Promise<never>(() => undefined), 10_000, () => new Error('late'), c.signal, map);
    c.abort(new Error('stop'));
    await expect(p).rejects.toThrow('mapped: stop');
    await expect(raceTimeout(new Promise<never>(() => undefined), 10_000, () => new Error('late'), c.signal, map)).rejects.toThrow('mapped: stop'); // already aborted
    // A call that fails after it lost the race is not mapped (nobody awaits that rejection).
    let failLate: (e: Error) => void = () => undefined;
    const lost = raceTimeout(new Promise<never>((_, rej) => (failLate = rej)), 10, () => new Error('late'), undefined, map);
    await expect(lost).rejects.toThrow('mapped: late');
    failLate(new Error('closed'));
    await new Promise((r) => setImmediate(r));
    expect(seen.map((e) => (e as Error).message)).toEqual(['refused', 'late', 'stop', 'stop', 'late']);
  });
});
