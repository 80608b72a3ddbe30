import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/core/errors.js';
import {
  optionalBoolean,
  optionalEnum,
  optionalNumber,
  optionalSignal,
  requireFunction,
  requireNumber,
  requireOptions,
  requireString,
} from '../../src/core/validate.js';

function fieldOf(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(ConfigError);
    return (e as ConfigError).field;
  }
  return undefined;
}

describe('option validation', () => {
  it('numbers: finite, integer, bounds', () => {
    expect(requireNumber('ttl', 5, { min: 1 })).toBe(5);
    expect(fieldOf(() => requireNumber('ttl', NaN))).toBe('ttl');
    expect(fieldOf(() => requireNumber('ttl', '5'))).toBe('ttl');
    expect(fieldOf(() => requireNumber('ttl', 1.5, { integer: true }))).toBe('ttl');
    expect(fieldOf(() => requireNumber('ttl', 0, { min: 0, exclusiveMin: true }))).toBe('ttl');
    expect(fieldOf(() => requireNumber('ttl', 11, { max: 10 }))).toBe('ttl');
    expect(optionalNumber('ttl', undefined, 10)).toBe(10);
  });

  it('strings: non-empty, length, pattern with a hint', () => {
    expect(requireString('path', '/a')).toBe('/a');
    expect(fieldOf(() => requireString('path', ''))).toBe('path');
    expect(fieldOf(() => requireString('path', 3))).toBe('path');
    expect(() => requireString('path', 'a', { pattern: /^\//, patternHint: "start with '/'" })).toThrow(
      "path: must start with '/', got \"a\"",
    );
    expect(fieldOf(() => requireString('name', 'abcd', { maxLength: 3 }))).toBe('name');
  });

  it('booleans, enums, signals, functions, option bags', () => {
    expect(optionalBoolean('x', undefined, true)).toBe(true);
    expect(fieldOf(() => optionalBoolean('x', 'yes', true))).toBe('x');
    expect(optionalEnum('policy', 'session', ['standard', 'session'], 'standard')).toBe('session');
    expect(() => optionalEnum('policy', 'lax', ['standard', 'session'], 'standard')).toThrow(/'standard', 'session'/);
    expect(fieldOf(() => optionalSignal('signal', {}))).toBe('signal');
    expect(fieldOf(() => requireFunction('takeLeadership', 1))).toBe('takeLeadership');
    expect(requireOptions('options', undefined, {})).toEqual({});
    expect(fieldOf(() => requireOptions('options', 5 as unknown as object, {}))).toBe('options');
  });

  it('an unknown option is refused, named (nested: under its object), with what was likely meant', () => {
    type Lock = { id?: string; ttlMs?: number; safetyMarginMs?: number; callTimeoutMs?: number; retryMaxMs?: number };
    const keys = { id: true, ttlMs: true, safetyMarginMs: true, callTimeoutMs: true, retryMaxMs: true } as const;
    const refuse = (o: object, field = 'options'): string => {
      try {
        requireOptions(field, o as Lock, keys);
      } catch (e) {
        expect(e).toBeInstanceOf(ConfigError);
        expect((e as ConfigError).code).toBe('CONFIG_INVALID');
        return (e as Error).message;
      }
      throw new Error('accepted');
    };
    expect(requireOptions('options', { ttlMs: 1, id: undefined }, keys)).toEqual({ ttlMs: 1, id: undefined });
    // The unit left off or spelled out, tenure's earlier names, the peers' names, a typo, the case.
    expect(refuse({ ttl: 2000 })).toBe("ttl: unknown option; did you mean 'ttlMs' (milliseconds)?");
    expect(refuse({ ttlSeconds: 2 })).toBe("ttlSeconds: unknown option; did you mean 'ttlMs' (milliseconds)?");
    expect(refuse({ sessionTimeoutMs: 2000 })).toBe("sessionTimeoutMs: unknown option; did you mean 'ttlMs'?");
    expect(refuse({ leaseDuration: 15 })).toMatch(/did you mean 'ttlMs'/);
    expect(refuse({ lockTimeout: 15 })).toMatch(/did you mean 'ttlMs'/);
    expect(refuse({ driftFactor: 0.01 })).toMatch(/did you mean 'safetyMarginMs'/);
    expect(refuse({ identity: 'a' })).toMatch(/did you mean 'id'/);
    expect(refuse({ timeout: 1 })).toMatch(/did you mean 'callTimeoutMs'/);
    expect(refuse({ retryDelay: 1 })).toMatch(/did you mean 'retryMaxMs'/);
    expect(refuse({ saftyMarginMs: 1 })).toMatch(/did you mean 'safetyMarginMs'/);
    expect(refuse({ TTL_MS: 1 })).toMatch(/did you mean 'ttlMs'/);
    // Nothing near: the message lists the options instead.
    expect(refuse({ colour: 'red' })).toBe('colour: unknown option; the options are id, ttlMs, safetyMarginMs, callTimeoutMs, retryMaxMs');
    // The first unknown key is named; a nested object's key under its field.
    expect(fieldOf(() => requireOptions('options', { ttlMs: 1, ttl: 1 } as Lock, keys))).toBe('ttl');
    expect(fieldOf(() => requireOptions('backoff', { min: 1 } as Lock, keys))).toBe('backoff.min');
    expect(refuse({ min: 1 }, 'backoff')).toMatch(/^backoff\.min: unknown option/);
    // Only own keys count: a prototype's are not options.
    expect(requireOptions('options', Object.create({ ttl: 1 }) as Lock, keys)).toEqual({});
  });
});
