import { ConfigError } from '../core/errors.js';
import type { BackendName } from './args.js';
import { showMs } from './args.js';

/**
 * How `--grace` and `--ttl` fit together. The command must be dead before the store can grant
 * the name elsewhere, even when it ignores SIGTERM: the term's local deadline (when SIGTERM goes
 * out) is therefore moved earlier by the whole grace. The lease's safety margin is
 * `grace + killBound`, where the bound covers the lateness of the two timers (the deadline's and
 * the grace's) and the SIGKILL's delivery on a busy machine.
 */

/** Room for timer lateness and the SIGKILL's delivery, at most. */
export const KILL_BOUND_MS = 250;

/** The bound for a TTL: 250 ms, or a tenth of a short TTL (so the default grace always fits). */
export function killBoundMs(ttlMs: number): number {
  return Math.min(KILL_BOUND_MS, Math.floor(ttlMs / 10));
}

export interface StopTiming {
  /** After SIGTERM, how long the command has before SIGKILL. */
  readonly graceMs: number;
  /** How long before the store could expire the lease the term ends (SIGTERM goes out). */
  readonly safetyMarginMs: number;
}

/**
 * Every backend keeps its margin below 2/3 of the TTL (refreshes go out every TTL/3: the margin
 * must leave room for one late refresh), so a grace fits when `grace + bound < 2/3 × TTL`.
 */
const fits = (ttlMs: number, graceMs: number): boolean => graceMs + killBoundMs(ttlMs) < (ttlMs * 2) / 3;

/** The smallest TTL `graceMs` fits, rounded up to what the store counts in (etcd: whole seconds). */
export function minTtlFor(graceMs: number, backend: BackendName): number {
  const unit = backend === 'etcd' ? 1000 : 1;
  let ttl = Math.ceil(((graceMs + 1) * 3) / 2 / unit) * unit;
  while (!fits(ttl, graceMs)) ttl += unit;
  return ttl;
}

/**
 * The grace (default TTL/5) and the safety margin it needs; a ConfigError naming the TTL it needs
 * when a grace cannot fit: a SIGKILL that could land after the store grants the name elsewhere
 * would let two commands run at once.
 */
export function stopTiming(ttlMs: number, graceMs: number | undefined, backend: BackendName): StopTiming {
  const grace = graceMs ?? Math.floor(ttlMs / 5);
  if (!fits(ttlMs, grace)) {
    const bound = killBoundMs(ttlMs);
    throw new ConfigError(
      '--grace',
      `${showMs(grace)} does not fit --ttl ${showMs(ttlMs)}: the command must be SIGKILLed before the store can grant the name elsewhere, so the term ends --grace + ${bound} ms before the lease could expire, and that must stay under 2/3 of the TTL; use --ttl ${showMs(minTtlFor(grace, backend))} or more, or a shorter --grace`,
    );
  }
  return { graceMs: grace, safetyMarginMs: grace + killBoundMs(ttlMs) };
}
