import { describe, expect, it } from 'vitest';
import { LocalDeadline, leaseTiming } from '../../src/core/deadline.js';
import { ConfigError } from '../../src/core/errors.js';
import type { Clock } from '../../src/index.js';

/** A clock a test steps by hand. */
function fakeClock(start = 1000): Clock & { step(ms: number): void } {
  let now = start;
  return { now: () => now, step: (ms) => void (now += ms) };
}

describe('LocalDeadline', () => {
  it('sits at send time + TTL − margin, moves forward on each acknowledgement and never back', () => {
    const clock = fakeClock();
    const fired: number[] = [];
    const d = new LocalDeadline({ clock, safetyMarginMs: 200, onExpire: (late) => fired.push(late) }, 1000, 1000);
    expect(d.at).toBe(1800);
    clock.step(300);
    expect(d.acknowledged(1250, 1000)).toBe(true);
    expect(d.at).toBe(2050);
    expect(d.acknowledged(1100, 1000)).toBe(true); // an older send never moves it back
    expect(d.at).toBe(2050);
    expect(d.remainingMs()).toBe(750);
    d.stop();
    expect(fired).toEqual([]);
  });

  it('expires when the clock steps past it, fires once, and a late acknowledgement does not revive it', () => {
    const clock = fakeClock();
    let fired = 0;
    const d = new LocalDeadline({ clock, safetyMarginMs: 100, onExpire: () => fired++ }, 1000, 500);
    clock.step(399);
    expect(d.expired()).toBe(false);
    clock.step(1);
    expect(d.expired()).toBe(true);
    expect(d.expired()).toBe(true);
    expect(fired).toBe(1);
    expect(d.acknowledged(clock.now(), 500)).toBe(false);
    expect(d.remainingMs()).toBe(0);
    expect(fired).toBe(1);
  });

  it('fires from its own timer when nothing checks it', async () => {
    const d = await new Promise<number>((resolve) => {
      new LocalDeadline({ clock: { now: () => performance.now() }, safetyMarginMs: 10, onExpire: (late) => resolve(late) }, performance.now(), 40);
    });
    expect(d).toBeGreaterThanOrEqual(0);
  });
});

describe('leaseTiming: the one margin rule', () => {
  const field = (f: () => unknown): string | undefined => {
    try {
      f();
    } catch (e) {
      return (e as ConfigError).field;
    }
    return undefined;
  };

  it('defaults the margin to a fifth of the TTL', () => {
    expect(leaseTiming({}, { minTtlMs: 1 })).toEqual({ ttlMs: 10_000, safetyMarginMs: 2000 });
    expect(leaseTiming({ ttlMs: 3000 }, { minTtlMs: 1 })).toEqual({ ttlMs: 3000, safetyMarginMs: 600 });
  });

  it('refuses a margin that is not in (0, 2/3 TTL), a TTL out of range or off the store unit', () => {
    const rule = { minTtlMs: 1000, ttlUnitMs: 1000 };
    expect(field(() => leaseTiming({ ttlMs: 3000, safetyMarginMs: 2000 }, rule))).toBe('safetyMarginMs');
    expect(field(() => leaseTiming({ ttlMs: 3000, safetyMarginMs: 0 }, rule))).toBe('safetyMarginMs');
    expect(field(() => leaseTiming({ ttlMs: 3000, safetyMarginMs: Number.NaN }, rule))).toBe('safetyMarginMs');
    expect(field(() => leaseTiming({ ttlMs: 1500 }, rule))).toBe('ttlMs');
    expect(field(() => leaseTiming({ ttlMs: 500 }, rule))).toBe('ttlMs');
    expect(field(() => leaseTiming({ ttlMs: 2 ** 31 }, { minTtlMs: 1 }))).toBe('ttlMs');
    expect(field(() => leaseTiming({ ttlMs: Infinity }, { minTtlMs: 1 }))).toBe('ttlMs');
  });
});
