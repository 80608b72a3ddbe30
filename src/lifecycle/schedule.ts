import { Cron } from 'croner';
import { MAX_TIMER_MS, sleep } from '../core/abort.js';
import { monotonicClock } from '../core/clock.js';
import { ConfigError } from '../core/errors.js';
import { optionalNumber, optionalString, requireFunction, requireNumber, requireOptions, requireString } from '../core/validate.js';
import type { TermContext } from './types.js';

/** What each run of a leader-only timer gets. */
export interface ScheduledRun {
  /** The term's signal: aborts the moment leadership ends (pass it to every call the run makes). */
  readonly signal: AbortSignal;
  /** The term's fence: send it with every write to a fenced resource. */
  readonly fence: bigint;
  /** When the run was due: the cron tick, or the interval's planned start (wall clock). */
  readonly scheduledAt: Date;
}

/** A leader-only timer's function. */
export type ScheduledFn = (run: ScheduledRun) => unknown;

/** Options of `manager.cron()`. */
export interface CronScheduleOptions {
  /** The IANA time zone the expression is read in (e.g. `Europe/Berlin`). @default the process's time zone */
  timezone?: string;
  /**
   * A tick missed by at most this many ms is run late, once: when a term begins, the latest tick
   * that came due in the gap before it (a crashed leader's TTL), and after a run that outlasted
   * the next tick, the latest tick that came due during it — each at once, coalesced (never more
   * than one pending: no burst). So a failover loses at most the tick in flight. The previous
   * leader may have run a caught-up tick already, or been killed in the middle of it: make the
   * job idempotent per `scheduledAt` (e.g. a row keyed by it, written through a fenced resource).
   * @default 0 (missed ticks are skipped)
   */
  catchUpMs?: number;
}

/**
 * The wall clock in ms, the one place a timer reads it: cron ticks are calendar times and
 * `scheduledAt` is shown to users; no lease math depends on it.
 */
function wallNow(): number {
  return new Date().getTime();
}

/** When the next run is due, and how to wait for it. */
interface Plan {
  /** The next due time strictly after `last` and after now; undefined when the schedule has no more. */
  next(last: Due | undefined): Due | undefined;
  /** Resolves at `due` (rejects with `signal.reason` when it aborts first). */
  wait(due: Due, signal: AbortSignal): Promise<void>;
  /** The latest due time already passed, within the catch-up window and after `last`; undefined when none. */
  missed?(last: Due | undefined): Due | undefined;
}
interface Due {
  /** Monotonic ms (interval) or wall-clock epoch ms (cron). */
  readonly t: number;
  readonly at: Date;
}

/** Fixed rate on the monotonic clock, anchored when the timer was made: each term resumes on the same beat. */
export function intervalPlan(intervalMs: number): Plan {
  requireNumber('intervalMs', intervalMs, { integer: true, min: 1, max: MAX_TIMER_MS });
  const anchor = monotonicClock.now();
  return {
    next: () => {
      const now = monotonicClock.now();
      const t = anchor + (Math.floor((now - anchor) / intervalMs) + 1) * intervalMs;
      return { t, at: new Date(wallNow() + (t - now)) };
    },
    wait: (due, signal) => sleep(due.t - monotonicClock.now(), signal),
  };
}

/** Calendar ticks from croner (cron is wall-clock time by definition; lease math never sees it). */
export function cronPlan(expression: string, options?: CronScheduleOptions): Plan {
  requireString('expression', expression, { maxLength: 1000 });
  const o = requireOptions('options', options, { timezone: true, catchUpMs: true });
  const timezone = optionalString('timezone', o.timezone, '', { maxLength: 100 }) || undefined;
  const catchUpMs = optionalNumber('catchUpMs', o.catchUpMs, 0, { integer: true, min: 0, max: MAX_TIMER_MS });
  if (timezone !== undefined) {
    try {
      new Intl.DateTimeFormat('en-US', { timeZone: timezone });
    } catch {
      throw new ConfigError('timezone', `must be an IANA time zone such as 'Europe/Berlin', got ${JSON.stringify(timezone)}`);
    }
  }
  let cron: Cron;
  try {
    cron = new Cron(expression, { timezone, paused: true });
  } catch (e) {
    throw new ConfigError('expression', `must be a cron expression (croner): ${(e as Error).message}`, { cause: e });
  }
  if (cron.nextRun() === null) throw new ConfigError('expression', `never fires: ${JSON.stringify(expression)}`);
  return {
    next: (last) => {
      const at = cron.nextRun(new Date(Math.max(wallNow(), last?.t ?? 0)));
      return at ? { t: at.getTime(), at } : undefined;
    },
    missed: (last) => {
      if (catchUpMs === 0) return undefined;
      const now = wallNow();
      // The latest tick at or before now: croner's previousRuns is strictly before its date and
      // nextRun strictly after, so a tick due at the very millisecond of a term's start was
      // neither caught up nor next (a full-suite run caught up the tick a second older).
      const at = cron.previousRuns(1, new Date(now + 1))[0];
      if (!at || at.getTime() < now - catchUpMs || (last && at.getTime() <= last.t)) return undefined;
      return { t: at.getTime(), at };
    },
    // In steps of at most a minute, re-reading the wall clock, so a clock step is caught up with.
    wait: async (due, signal) => {
      for (let left = due.t - wallNow(); left > 0; left = due.t - wallNow()) await sleep(Math.min(left, 60_000), signal);
    },
  };
}

/** The part of a LeadershipManager a timer needs. */
export interface ScheduleHost {
  readonly currentTerm: TermContext | undefined;
  on(event: 'elected', fn: (ctx: TermContext) => void): unknown;
  off(event: 'elected', fn: (ctx: TermContext) => void): unknown;
}

/**
 * A leader-only timer (`manager.every()` / `manager.cron()`): while this process leads, runs the
 * function at each due time, as work of the term (the drain waits for it). A run never overlaps
 * the previous one; due times missed while a run was still going or while not leading are
 * skipped, never made up in a burst (a cron timer's `catchUpMs` runs the latest one missed — before
 * a term or during a run — once, right away). When the term ends the running run's `signal`
 * aborts and no further run starts; the next term resumes at the next due time.
 */
export class LeaderSchedule implements Disposable {
  readonly #host: ScheduleHost;
  readonly #plan: Plan;
  readonly #fn: ScheduledFn;
  readonly #report: (e: unknown) => void;
  readonly #stopped = new AbortController();
  #last: Due | undefined;
  readonly #onElected = (ctx: TermContext): void => void this.#loop(ctx);

  /** @internal made by `manager.every()` / `manager.cron()` */
  constructor(host: ScheduleHost, plan: Plan, fn: ScheduledFn, report: (e: unknown) => void) {
    this.#fn = requireFunction('fn', fn);
    this.#host = host;
    this.#plan = plan;
    this.#report = report;
    host.on('elected', this.#onElected);
    const now = host.currentTerm;
    if (now) void this.#loop(now);
  }

  /** Stops the timer: no further run starts (a run in progress finishes as work of its term). Idempotent. */
  stop(): void {
    this.#stopped.abort();
    this.#host.off('elected', this.#onElected);
  }

  /** Same as `stop()`, for `using timer = manager.every(…)`. */
  [Symbol.dispose](): void {
    this.stop();
  }

  async #loop(ctx: TermContext): Promise<void> {
    const signal = AbortSignal.any([ctx.signal, this.#stopped.signal]);
    for (;;) {
      // With catchUpMs, the latest tick missed (in the gap before this term, or while the last
      // run was still going) runs now, once: coalesced, so a long catch-up run does not lose the
      // tick that came due during it, and a failover loses at most the tick in flight.
      const overdue = this.#plan.missed?.(this.#last);
      const due = overdue ?? this.#plan.next(this.#last);
      if (!due) return;
      if (!overdue) {
        try {
          await this.#plan.wait(due, signal);
        } catch {
          return; // the term ended or the timer stopped
        }
      }
      if (signal.aborted) return;
      this.#last = due;
      const run: ScheduledRun = Object.freeze({ signal: ctx.signal, fence: ctx.fence, scheduledAt: due.at });
      try {
        await ctx.track(async () => this.#fn(run));
      } catch (e) {
        // A run that fails because its term ended is the term ending, not a failed run.
        if (ctx.signal.aborted) return;
        this.#report(e);
      }
    }
  }
}
