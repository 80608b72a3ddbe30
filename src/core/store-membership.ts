import { raceSignal, waitScope, whenAborted } from './abort.js';
import { Backoff } from './backoff.js';
import { BusyError, ClosedError, TenureError } from './errors.js';
import { normalizeMembers, sameMembers, type Member, type Membership } from './membership.js';
import { SIGNAL_KEYS, WAIT_KEYS, type Logger, type WaitOptions } from './options.js';
import { optionalSignal, requireNumber, requireOptions } from './validate.js';

/**
 * What a backend's membership is made of: how to put this member in the store's set on the
 * current session, take it out, and read or follow the set. The loop around it (join, stay
 * joined across lost sessions, leave) is {@link StoreMembership}, written once.
 */
export interface MembershipDriver {
  /** Names the group in errors and logs, e.g. `etcd membership 'workers'`. */
  readonly what: string;
  readonly logger: Logger;
  /**
   * Puts this member in the set on the current session (granting a lease or waiting for a
   * connection as the backend does) and resolves with a signal that aborts when that entry's
   * liveness ends: the etcd lease or ZooKeeper session lost, the Redis renew watchdog or the
   * Postgres pinned connection ended. Rejects with BusyError when another live member has this
   * id, and with `signal.reason` when `signal` aborts (leaving nothing behind).
   */
  enter(signal: AbortSignal): Promise<AbortSignal>;
  /** Takes this member's entry out, owner-checked and bounded; a lost entry is not waited for. */
  exit(): Promise<void>;
  /** The live set, as the store lists it (normalized by the caller). */
  read(signal: AbortSignal): Promise<Member[]>;
  /** The live set now, then after every change (normalized and deduplicated by the caller). */
  watch(signal: AbortSignal): AsyncGenerator<Member[], void, undefined>;
  /** Frees what the driver holds (subscriber connections), after the member left. */
  close?(): Promise<void>;
}

/** Validates a member weight: a finite number > 0. @default 1 */
export function optionalWeight(value: unknown): number {
  return value === undefined ? 1 : requireNumber('weight', value, { min: 0, exclusiveMin: true, max: 1e6 });
}

/** Errors worth another try while joining: the store or the session, not the request. */
function retryable(e: unknown): boolean {
  return e instanceof TenureError ? e.retryable && !(e instanceof ClosedError) : true;
}

/**
 * A {@link Membership} over any backend's {@link MembershipDriver}: `join()` enters once, and a
 * loop keeps the member in the set — after the entry's liveness ends (a lost lease or session), it
 * enters again on the next one, with jittered backoff, until `leave()`. A first `join()` that
 * fails for good (another live member has the id: BusyError; a permission error) or is given up
 * (timeout, signal) leaves nothing behind.
 */
export class StoreMembership implements Membership {
  readonly group: string;
  readonly id: string;
  readonly weight: number;
  readonly #d: MembershipDriver;
  readonly #leaving = new AbortController();
  #loop: { ctl: AbortController; done: Promise<void> } | undefined;
  #live: AbortSignal | undefined;
  #enteredOnce = false;
  readonly #waiters = new Set<{ resolve: () => void; reject: (e: unknown) => void }>();
  #left: Promise<void> | undefined;
  #stopping: Promise<void> = Promise.resolve();

  constructor(group: string, id: string, weight: number, driver: MembershipDriver) {
    this.group = group;
    this.id = id;
    this.weight = weight;
    this.#d = driver;
  }

  get joined(): boolean {
    return this.#live !== undefined && !this.#live.aborted;
  }

  async join(options?: WaitOptions): Promise<void> {
    const o = requireOptions('options', options, WAIT_KEYS);
    optionalSignal('signal', o.signal);
    o.signal?.throwIfAborted();
    if (this.#leaving.signal.aborted) throw new ClosedError(this.#d.what);
    if (this.joined) return;
    const scope = waitScope(`${this.#d.what}: join`, { signal: o.signal ? AbortSignal.any([o.signal, this.#leaving.signal]) : this.#leaving.signal, timeoutMs: o.timeoutMs });
    let waiter!: { resolve: () => void; reject: (e: unknown) => void };
    const entered = new Promise<void>((resolve, reject) => (waiter = { resolve, reject }));
    this.#waiters.add(waiter);
    this.#loop ??= this.#start();
    try {
      await raceSignal(entered, scope.signal);
    } catch (e) {
      // Given up before the first entry: nothing may stay behind (like an aborted campaign).
      this.#waiters.delete(waiter);
      // (in the background: an entry in flight is undone once it settles, not waited for here)
      if (!this.#enteredOnce && this.#waiters.size === 0) void this.#stop();
      if (this.#leaving.signal.aborted && !(e instanceof ClosedError)) throw new ClosedError(this.#d.what);
      throw e;
    } finally {
      this.#waiters.delete(waiter);
      scope.dispose();
    }
  }

  async members(options?: WaitOptions): Promise<Member[]> {
    const o = requireOptions('options', options, WAIT_KEYS);
    const scope = waitScope(`${this.#d.what}: members`, { signal: optionalSignal('signal', o.signal), timeoutMs: o.timeoutMs });
    try {
      return normalizeMembers(await raceSignal(this.#d.read(scope.signal), scope.signal));
    } finally {
      scope.dispose();
    }
  }

  observe(options?: { signal?: AbortSignal }): AsyncGenerator<readonly Member[], void, undefined> {
    const o = requireOptions('options', options, SIGNAL_KEYS);
    const signal = optionalSignal('signal', o.signal) ?? new AbortController().signal;
    return distinct(this.#d.watch(signal));
  }

  leave(): Promise<void> {
    this.#left ??= (async () => {
      this.#leaving.abort(new ClosedError(this.#d.what));
      for (const w of this.#waiters) w.reject(new ClosedError(this.#d.what));
      await this.#stop();
      await this.#d.close?.().catch((e: unknown) => this.#d.logger.debug({ err: e }, `${this.#d.what}: close failed`));
    })();
    return this.#left;
  }

  /** Same as `leave()`, for `await using`. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.leave();
  }

  #start(): { ctl: AbortController; done: Promise<void> } {
    const ctl = new AbortController();
    const stopping = this.#stopping;
    // A loop being stopped (a given-up join) ends and undoes its entry before the next one starts.
    return { ctl, done: stopping.then(() => this.#run(ctl.signal)) };
  }

  /** Ends the loop and takes the entry out (owner-checked, bounded by the driver). */
  #stop(): Promise<void> {
    const loop = this.#loop;
    if (!loop) return this.#stopping;
    this.#loop = undefined;
    loop.ctl.abort(new ClosedError(this.#d.what));
    this.#stopping = (async () => {
      await loop.done;
      this.#live = undefined;
      await this.#d.exit().catch((e: unknown) => this.#d.logger.warn({ err: e }, `${this.#d.what}: could not remove this member's entry (it goes with its lease)`));
    })();
    return this.#stopping;
  }

  async #run(stop: AbortSignal): Promise<void> {
    if (stop.aborted) return;
    const backoff = new Backoff({ initialMs: 100, maxMs: 2000 });
    while (!stop.aborted) {
      let live: AbortSignal;
      try {
        live = await this.#d.enter(stop);
      } catch (e) {
        if (stop.aborted) return;
        if (e instanceof ClosedError) {
          // The session (or client) under the membership was closed: nothing to join again on.
          for (const w of this.#waiters) w.reject(e);
          this.#waiters.clear();
          if (this.#enteredOnce) this.#d.logger.warn({ id: this.id }, `${this.#d.what}: the session was closed; not joining again`);
          if (this.#loop?.ctl.signal === stop) this.#loop = undefined;
          return;
        }
        // Before the first entry the caller hears what cannot succeed (the id is taken, a
        // permission); after it, an id "taken" is most likely this member's own entry from the
        // lease just lost, still at the store until that lease ends: try again.
        if (!this.#enteredOnce && !(retryable(e) && !(e instanceof BusyError))) {
          for (const w of this.#waiters) w.reject(e);
          this.#waiters.clear();
          if (this.#loop?.ctl.signal === stop) this.#loop = undefined;
          return;
        }
        this.#d.logger.debug({ err: e }, `${this.#d.what}: join failed; retrying`);
        await backoff.wait(stop).catch(() => undefined);
        continue;
      }
      backoff.reset();
      this.#live = live;
      if (!this.#enteredOnce) this.#d.logger.info({ id: this.id }, `${this.#d.what}: joined`);
      else this.#d.logger.info({ id: this.id }, `${this.#d.what}: joined again`);
      this.#enteredOnce = true;
      for (const w of this.#waiters) w.resolve();
      this.#waiters.clear();
      await Promise.race([whenAborted(live), whenAborted(stop)]);
      if (stop.aborted) return;
      this.#d.logger.warn({ id: this.id, reason: String((live.reason as Error | undefined)?.message ?? live.reason) }, `${this.#d.what}: membership lost with its lease; joining again`);
      await backoff.wait(stop).catch(() => undefined);
    }
  }
}

/** Normalizes each set and skips those equal to the one before. */
async function* distinct(it: AsyncGenerator<Member[], void, undefined>): AsyncGenerator<readonly Member[], void, undefined> {
  let last: readonly Member[] | undefined;
  for await (const set of it) {
    const now = normalizeMembers(set);
    if (last !== undefined && sameMembers(last, now)) continue;
    last = now;
    yield now;
  }
}
