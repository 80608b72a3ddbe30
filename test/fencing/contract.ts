import { describe, expect, it } from 'vitest';
import { ConfigError, StaleFenceError, type FencedResource } from '../../src/index.js';

/**
 * The contract every FencedResource keeps, run against each implementation (memory, Postgres,
 * Redis). `make` returns a fresh resource under its own name; `write` adapts the
 * implementation's write to "record `value` under fence `f`" and `read` returns the last value.
 */
export interface ContractSubject {
  resource: FencedResource<never> | FencedResource<unknown> | FencedResource<void>;
  write(fence: bigint, value: string): Promise<unknown>;
  /** A write whose body fails after the fence check (implementation-specific). */
  failingWrite(fence: bigint): Promise<unknown>;
  read(): Promise<string | undefined>;
  close?(): Promise<void>;
}

export function fencedResourceContract(kind: string, make: () => Promise<ContractSubject>): void {
  describe(`FencedResource contract: ${kind}`, () => {
    const withSubject = (fn: (s: ContractSubject) => Promise<void>) => async () => {
      const s = await make();
      try {
        await fn(s);
      } finally {
        await s.close?.();
      }
    };

    it('accepts a first write and reports its fence as the highest', withSubject(async (s) => {
      await s.write(5n, 'a');
      expect(await s.resource.highestFence()).toBe(5n);
      expect(await s.read()).toBe('a');
    }));

    it('lets the same holder write many times with its own fence', withSubject(async (s) => {
      await s.write(7n, 'a');
      await s.write(7n, 'b');
      expect(await s.read()).toBe('b');
      expect(await s.resource.highestFence()).toBe(7n);
    }));

    it('rejects a lower fence with StaleFenceError and leaves the data untouched', withSubject(async (s) => {
      await s.write(10n, 'new holder');
      const err = await s.write(9n, 'zombie').catch((e: unknown) => e);
      expect(err).toBeInstanceOf(StaleFenceError);
      expect(err).toMatchObject({ code: 'STALE_FENCE', fence: 9n, highest: 10n });
      expect(await s.read()).toBe('new holder');
      expect(await s.resource.highestFence()).toBe(10n);
    }));

    it('accepts a higher fence after a lower one', withSubject(async (s) => {
      await s.write(1n, 'a');
      await s.write(2n, 'b');
      expect(await s.read()).toBe('b');
      expect(await s.resource.highestFence()).toBe(2n);
    }));

    it('does not move the fence when the write body fails', withSubject(async (s) => {
      await s.write(3n, 'a');
      await expect(s.failingWrite(4n)).rejects.toBeDefined();
      expect(await s.resource.highestFence()).toBe(3n);
      expect(await s.read()).toBe('a');
    }));

    it('orders concurrent writers: nothing below the maximum is accepted after it', withSubject(async (s) => {
      const fences = Array.from({ length: 40 }, (_, i) => BigInt(1 + ((i * 17) % 40)));
      const results = await Promise.allSettled(fences.map((f) => s.write(f, `v${f}`).then(() => f)));
      const accepted: bigint[] = [];
      for (const r of results) {
        if (r.status === 'fulfilled') accepted.push(r.value);
        else expect(r.reason).toBeInstanceOf(StaleFenceError);
      }
      expect(accepted).toContain(40n);
      expect(await s.resource.highestFence()).toBe(40n);
      expect(await s.read()).toBe('v40');
    }));

    it('refuses a fence that is not a non-negative bigint with ConfigError', withSubject(async (s) => {
      await expect(s.write(5 as unknown as bigint, 'x')).rejects.toBeInstanceOf(ConfigError);
      await expect(s.write(-1n, 'x')).rejects.toBeInstanceOf(ConfigError);
    }));
  });
}
