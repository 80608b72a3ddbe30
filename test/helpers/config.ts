import { ConfigError } from '../../src/index.js';

/** The field a synchronous call's ConfigError names (undefined when it does not throw; a note when it throws something else). */
export function fieldOf(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (e) {
    return e instanceof ConfigError ? e.field : `not a ConfigError: ${String(e)}`;
  }
  return undefined;
}
