import { describe, expect, it } from 'vitest';
import { raceSignal, sleep, waitScope, whenAborted } from '../../src/core/abort.js';
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
  });

  it('raceSignal settles with the promise or rejects with the reason', async () => {
    await expect(raceSignal(Promise.resolve(1), new AbortController().signal)).resolves.toBe(1);
    const c = new AbortController();
    const p = raceSignal(new Promise(() => undefined), c.signal);
    c.abort(new Error('cancelled'));
    await expect(p).rejects.toThrow('cancelled');
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
});
