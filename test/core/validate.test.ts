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
    expect(requireOptions('options', undefined)).toEqual({});
    expect(fieldOf(() => requireOptions('options', 5 as unknown as object))).toBe('options');
  });
});
