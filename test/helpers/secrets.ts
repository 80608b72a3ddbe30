import { inspect } from 'node:util';
import { expect } from 'vitest';
import { pino } from 'pino';

/** Every error in `err`'s chain: itself, its `cause`s and an AggregateError's `errors`. */
function chain(err: unknown): unknown[] {
  const out: unknown[] = [];
  const walk = (e: unknown): void => {
    if (e === null || e === undefined || out.includes(e)) return;
    out.push(e);
    if (typeof e !== 'object') return;
    walk((e as { cause?: unknown }).cause);
    const errors = (e as { errors?: unknown }).errors;
    if (Array.isArray(errors)) for (const x of errors) walk(x);
  };
  walk(err);
  return out;
}

const json = (v: unknown): string => {
  try {
    return JSON.stringify(v, (_k, x: unknown) => (typeof x === 'bigint' ? String(x) : x)) ?? '';
  } catch (e) {
    return `unserializable: ${String(e)}`;
  }
};

/**
 * Everything an error reporter could show of `err`: `util.inspect` at full depth (hidden
 * properties too), and for each error of the chain `String`, the stack and `JSON.stringify`,
 * and pino's standard `err` and `errWithCause` serializers.
 */
export function exposures(err: unknown): string {
  const parts = [inspect(err, { depth: Infinity, showHidden: true }), inspect(err, { depth: Infinity })];
  for (const e of chain(err)) parts.push(String(e), (e as { stack?: string } | null)?.stack ?? '', json(e));
  if (err instanceof Error) parts.push(json(pino.stdSerializers.err(err)), json(pino.stdSerializers.errWithCause(err)));
  return parts.join('\n');
}

/** Asserts that none of `secrets` appears anywhere `exposures` looks. */
export function expectNoSecret(err: unknown, ...secrets: string[]): void {
  const text = exposures(err);
  for (const s of secrets) {
    const at = text.indexOf(s);
    expect(at, `secret found: …${text.slice(Math.max(0, at - 200), at + s.length + 50)}…`).toBe(-1);
  }
}
