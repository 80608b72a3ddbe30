import { AsyncLocalStorage } from 'node:async_hooks';
import { NoTermError } from '../core/errors.js';
import type { TermContext } from './types.js';

/**
 * The term a piece of work runs in, carried through its async calls: a repository deep in the
 * call tree reads the fence with `currentTerm()` instead of having it threaded through every
 * argument list. Set for every piece of work the manager runs or tracks for a term.
 */
const storage = new AsyncLocalStorage<TermContext>();

/** Runs `fn` inside the term `ctx` (what `currentTerm()` returns below it). */
export function runInTerm<T>(ctx: TermContext, fn: () => T): T {
  return storage.run(ctx, fn);
}

/**
 * The term the calling code runs in: `{ signal, fence, term, track }`, anywhere below a
 * `@Leader()` method, an `onElected` hook, a leader-only timer's run or work tracked with a term.
 * Code that outlives its term still sees it, with its `signal` aborted. Throws NoTermError
 * (code `NO_TERM`) outside a term.
 */
export function currentTerm(): TermContext {
  const ctx = storage.getStore();
  if (!ctx) throw new NoTermError();
  return ctx;
}
