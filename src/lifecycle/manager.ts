import { EventEmitter } from 'eventemitter3';
import { sleep, waitScope } from '../core/abort.js';
import { Backoff, backoffOptions, type BackoffOptions } from '../core/backoff.js';
import type { Candidate } from '../core/candidate.js';
import type { Lease } from '../core/lease.js';
import { ClosedError, ConfigError, NotLeaderError, StateError } from '../core/errors.js';
import { optionalLogger, WAIT_KEYS, type Logger } from '../core/options.js';
import { optionalBoolean, optionalNumber, optionalSignal, requireFunction, requireOptions, type OptionKeys } from '../core/validate.js';
import { cronPlan, intervalPlan, LeaderSchedule, type CronScheduleOptions, type ScheduledFn } from './schedule.js';
import { TermRun } from './term.js';
import type { DemotionInfo, LeadershipEvents, LeadershipState, TermContext } from './types.js';

/** Options of a {@link LeadershipManager}, validated at construction. */
export interface LeadershipManagerOptions {
  /**
   * How long, after a term ends, to wait for `onElected` and the term's tracked work to settle
   * before the lease is released and `onDemoted` runs. Work still running then is reported
   * (`timedOut`, an `error` event) and the manager does not campaign again until it settles.
   * @default 10000
   */
  drainTimeoutMs?: number;
  /** Pauses before campaigning again after a lost term, a hook error or a failed campaign (jittered). @default { initialMs: 100, maxMs: 5000 } */
  backoff?: BackoffOptions;
  /** Leadership ends when every `onElected` hook has returned (Curator's LeaderSelector); else it lasts until the term ends. @default false */
  releaseOnReturn?: boolean;
  /** Report every leader change as a `leaderChanged` event (the candidate's `observe()`). @default true */
  observeLeader?: boolean;
  /** @default silent */
  logger?: Logger;
}

/** @internal the keys of {@link LeadershipManagerOptions}. */
export const MANAGER_KEYS: OptionKeys<LeadershipManagerOptions> = { drainTimeoutMs: true, backoff: true, releaseOnReturn: true, observeLeader: true, logger: true };

/**
 * @internal The manager's options, validated as the constructor reads them: integrations that make
 * the candidate later (tenure/nestjs) call it first, so a bad option fails before any I/O.
 */
export function managerSettings(options: LeadershipManagerOptions | undefined, loggerBindings: Record<string, unknown>): { drainMs: number; backoff: Required<BackoffOptions>; releaseOnReturn: boolean; observeLeader: boolean; logger: Logger } {
  const o = requireOptions('options', options, MANAGER_KEYS);
  return {
    drainMs: optionalNumber('drainTimeoutMs', o.drainTimeoutMs, 10_000, { integer: true, min: 0, max: 2 ** 31 - 1 }),
    backoff: backoffOptions(o.backoff, 'backoff', { initialMs: 100, maxMs: 5000 }),
    releaseOnReturn: optionalBoolean('releaseOnReturn', o.releaseOnReturn, false),
    observeLeader: optionalBoolean('observeLeader', o.observeLeader, true),
    logger: optionalLogger(o.logger, loggerBindings),
  };
}

/** A hook run at the start of every term, with the term's context (signal, fence, term, track). */
export type ElectedHook = (ctx: TermContext) => unknown;
/** A hook run once per term, after the drain and the release of the lease. */
export type DemotedHook = (info: DemotionInfo) => unknown;

/**
 * Runs your code only while this process leads, and takes it away safely. Written against
 * {@link Candidate} only, so it is the same on etcd, ZooKeeper, Redis and Postgres.
 *
 * For every term: `onElected({ signal, fence, term, track })` hooks run; when the term ends — its
 * lease lost (or maybe lost), `resign()`, `close()`, a hook that throws — the term's `signal`
 * aborts **first** (and `isLeader()` is false from that instant), then the manager waits for the
 * hooks and every piece of tracked work to settle (up to `drainTimeoutMs`), **then** releases the
 * lease, **then** fires `onDemoted` once, and then (unless closed) campaigns again with jittered
 * backoff. Never two terms at once in one process.
 */
export class LeadershipManager extends EventEmitter<LeadershipEvents> implements AsyncDisposable {
  /** The candidate it campaigns with (any backend's). */
  readonly candidate: Candidate;
  readonly #drainMs: number;
  readonly #backoff: Backoff;
  readonly #releaseOnReturn: boolean;
  readonly #observe: boolean;
  readonly #logger: Logger;
  readonly #elected: ElectedHook[] = [];
  readonly #demoted: DemotedHook[] = [];
  readonly #closing = new AbortController();
  #state: LeadershipState = 'follower';
  #term: TermRun | undefined;
  #started = false;
  #loop: Promise<void> | undefined;
  #observer: Promise<void> | undefined;
  #cooldownUntil = 0;
  #closed: Promise<void> | undefined;

  constructor(candidate: Candidate, options?: LeadershipManagerOptions) {
    super();
    const c = candidate as Partial<Candidate> | null;
    if (!c || typeof c !== 'object' || typeof c.campaign !== 'function' || typeof c.resign !== 'function' || typeof c.close !== 'function' || typeof c.id !== 'string') {
      throw new ConfigError('candidate', 'must be a Candidate (campaign, resign, leader, observe, close, id)');
    }
    this.candidate = candidate;
    const s = managerSettings(options, { component: 'leadership', election: candidate.name, id: candidate.id });
    this.#drainMs = s.drainMs;
    this.#backoff = new Backoff(s.backoff);
    this.#releaseOnReturn = s.releaseOnReturn;
    this.#observe = s.observeLeader && typeof c.observe === 'function';
    this.#logger = s.logger;
  }

  /** Adds a hook run at the start of every term (they run concurrently; the drain waits for all). */
  onElected(hook: ElectedHook): this {
    this.#elected.push(requireFunction('hook', hook));
    return this;
  }

  /** Adds a hook run once per term, after the drain and the release of the lease. */
  onDemoted(hook: DemotedHook): this {
    this.#demoted.push(requireFunction('hook', hook));
    return this;
  }

  /** Starts campaigning (and observing). Throws StateError when started twice, ClosedError after close. */
  start(): this {
    if (this.#closing.signal.aborted) throw new ClosedError('leadership manager');
    if (this.#started) throw new StateError('leadership manager: already started');
    this.#started = true;
    this.#loop = this.#run();
    if (this.#observe) this.#observer = this.#watchLeader();
    return this;
  }

  /** The current state. */
  get state(): LeadershipState {
    return this.#state;
  }

  /** True while a term is live: false from the instant its signal aborts (the lease's local deadline is checked too). */
  isLeader(): boolean {
    return this.#term !== undefined && !this.#term.ended;
  }

  /** The live term's context, while leading. */
  get currentTerm(): TermContext | undefined {
    return this.isLeader() ? this.#term!.ctx : undefined;
  }

  /** Resolves with the term's context once leading (at once when leading now). */
  async whenElected(options?: { signal?: AbortSignal; timeoutMs?: number }): Promise<TermContext> {
    const o = requireOptions('options', options, WAIT_KEYS);
    optionalSignal('signal', o.signal);
    const now = this.currentTerm;
    if (now) return now;
    if (this.#closing.signal.aborted) throw new ClosedError('leadership manager');
    const scope = waitScope('leadership manager: whenElected', { signal: o.signal ? AbortSignal.any([o.signal, this.#closing.signal]) : this.#closing.signal, timeoutMs: o.timeoutMs });
    let onElected!: (ctx: TermContext) => void;
    let onAbort!: () => void;
    try {
      return await new Promise<TermContext>((resolve, reject) => {
        onElected = (ctx) => resolve(ctx);
        onAbort = () => reject(scope.signal.reason);
        this.on('elected', onElected);
        scope.signal.addEventListener('abort', onAbort, { once: true });
        if (scope.signal.aborted) onAbort(); // aborted already: no event will come
      });
    } finally {
      this.off('elected', onElected);
      scope.signal.removeEventListener('abort', onAbort);
      scope.dispose();
    }
  }

  /**
   * Runs `work(ctx)` as work of the live term (the drain waits for it; its `ctx.signal` aborts
   * on demotion). Rejects with NotLeaderError when not leading.
   */
  track<T>(work: (ctx: TermContext) => Promise<T> | T): Promise<T> {
    requireFunction('work', work);
    const t = this.#term;
    if (!t || t.ended) return Promise.reject(new NotLeaderError(`${this.candidate.name}: not the leader`));
    return t.track(async () => work(t.ctx));
  }

  /**
   * Runs `fn({ signal, fence, scheduledAt })` every `intervalMs` while leading (the first run one
   * interval after the timer was made, then on that beat; a term resumes on it). See LeaderSchedule.
   */
  every(intervalMs: number, fn: ScheduledFn): LeaderSchedule {
    return new LeaderSchedule(this, intervalPlan(intervalMs), fn, (e) => this.#error(e));
  }

  /** Runs `fn({ signal, fence, scheduledAt })` at each tick of a cron `expression` (croner syntax, seconds optional) while leading. See LeaderSchedule. */
  cron(expression: string, fn: ScheduledFn, options?: CronScheduleOptions): LeaderSchedule {
    return new LeaderSchedule(this, cronPlan(expression, options), fn, (e) => this.#error(e));
  }

  /**
   * Ends the current term (signal first, then drain, release, `onDemoted`) and does not campaign
   * again for `cooldownMs`, so a waiting candidate leads next. Resolves once demoted.
   */
  async resign(options?: { cooldownMs?: number }): Promise<void> {
    const o = requireOptions('options', options, { cooldownMs: true });
    const cooldownMs = optionalNumber('cooldownMs', o.cooldownMs, 0, { integer: true, min: 0, max: 2 ** 31 - 1 });
    this.#cooldownUntil = performance.now() + cooldownMs;
    const t = this.#term;
    if (!t || t.ended) return;
    const demoted = new Promise<void>((r) => this.once('demoted', () => r()));
    t.end('resigned');
    await demoted;
  }

  /** Ends the current term (as resign does), stops campaigning and observing. Idempotent. */
  close(): Promise<void> {
    this.#closed ??= (async () => {
      this.#closing.abort(new ClosedError('leadership manager'));
      this.#term?.end('closed');
      await this.#loop;
      await this.#observer;
      await this.candidate.close().catch((e: unknown) => this.#error(e));
      this.#setState('closed');
    })();
    return this.#closed;
  }

  /** Same as `close()`, for `await using`. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  #setState(next: LeadershipState): void {
    const prev = this.#state;
    if (prev === next || prev === 'closed') return;
    this.#state = next;
    this.#logger.info({ state: next, previous: prev }, 'leadership state');
    this.emit('state', next, prev);
  }

  #error(e: unknown): void {
    this.#logger.warn({ err: e }, 'leadership: error');
    if (this.listenerCount('error') > 0) this.emit('error', e);
  }

  async #run(): Promise<void> {
    const closing = this.#closing.signal;
    while (!closing.aborted) {
      const wait = this.#cooldownUntil - performance.now();
      if (wait > 0) await sleep(wait, closing).catch(() => undefined);
      if (closing.aborted) break;
      this.#setState('campaigning');
      let lease;
      try {
        lease = await this.candidate.campaign({ signal: closing });
      } catch (e) {
        if (closing.aborted) break;
        this.#error(e);
        this.#setState('follower');
        await this.#backoff.wait(closing).catch(() => undefined);
        continue;
      }
      const ended = await this.#runTerm(lease);
      if (ended === 'lost' || ended === 'hook-error') await this.#backoff.wait(closing).catch(() => undefined);
      else this.#backoff.reset();
    }
  }

  /** One term, from election to demotion. Resolves with why it ended. */
  async #runTerm(lease: Lease): Promise<string> {
    const run = new TermRun(lease);
    this.#term = run;
    if (this.#closing.signal.aborted) run.end('closed'); // elected just as close() began
    this.#setState('leader');
    this.#logger.info({ fence: String(lease.fence) }, 'elected');
    this.emit('elected', run.ctx);
    const hooks = this.#elected.map((hook) =>
      run.track(async () => hook(run.ctx)).catch((e: unknown) => {
        // A hook that fails because its term ended is the term ending, not a hook error.
        if (run.ended) return;
        this.#error(e);
        run.end('hook-error', e);
      }),
    );
    if (this.#releaseOnReturn) void Promise.all(hooks).then(() => run.end('hook-returned'));
    const why = await run.whenEnded();
    // 1. The signal has aborted; 2. drain; 3. release the lease; 4. onDemoted; 5. campaign again.
    this.#setState('draining');
    this.#logger.info({ fence: String(lease.fence), reason: why.reason, lostReason: why.lostReason }, 'term ended: draining');
    const { drainedMs, timedOut, pending } = await run.drain(this.#drainMs);
    if (timedOut) this.#error(new StateError(`${this.candidate.name}: work of term ${lease.fence} still running ${this.#drainMs} ms after the term ended (drainTimeoutMs); not campaigning again until it settles`));
    // A lost term's lease is gone already (the store ends it by itself): its cleanup must not hold
    // up onDemoted, which then runs before a partitioned leader's successor can be elected. The
    // next campaign still waits for it.
    const resigned = this.candidate.resign().catch((e: unknown) => this.#error(e));
    if (why.reason !== 'lost') await resigned;
    this.#term = undefined;
    const info: DemotionInfo = Object.freeze({ reason: why.reason, lostReason: why.lostReason, fence: lease.fence, drainedMs, timedOut, error: why.reason === 'hook-error' ? why.cause : undefined });
    for (const hook of this.#demoted) {
      try {
        await hook(info);
      } catch (e) {
        this.#error(e);
      }
    }
    this.#setState(this.#closing.signal.aborted ? 'closed' : 'follower');
    this.emit('demoted', info);
    await resigned;
    // Never two terms at once: work that outlived its drain must settle before the next campaign.
    if (timedOut && !this.#closing.signal.aborted) await Promise.race([pending, new Promise((r) => this.#closing.signal.addEventListener('abort', r, { once: true }))]);
    return why.reason;
  }

  async #watchLeader(): Promise<void> {
    const closing = this.#closing.signal;
    const backoff = new Backoff({ initialMs: 100, maxMs: 5000 });
    while (!closing.aborted) {
      try {
        for await (const leader of this.candidate.observe({ signal: closing })) {
          backoff.reset();
          this.emit('leaderChanged', leader);
        }
        // Ended without an error (a hand-written Candidate may): observe again, but after the
        // same backoff as after an error — re-entering at once spins on microtasks and starves
        // the event loop (close() would never run).
        if (closing.aborted) break;
        this.#logger.debug('leadership: observe() ended; observing again after a backoff');
      } catch (e) {
        if (closing.aborted) break;
        this.#error(e);
      }
      await backoff.wait(closing).catch(() => undefined);
    }
  }
}
