import { EventEmitter } from 'eventemitter3';
import { waitScope } from '../core/abort.js';
import { Backoff, backoffOptions, retryUntil, type BackoffOptions } from '../core/backoff.js';
import { ClosedError, ConfigError, StateError } from '../core/errors.js';
import { sameMembers, type Member, type Membership } from '../core/membership.js';
import { optionalLogger, WAIT_KEYS, type Logger } from '../core/options.js';
import { optionalNumber, optionalSignal, requireFunction, requireNumber, requireOptions } from '../core/validate.js';
import { LeadershipManager } from './manager.js';
import { shardOwner, shardsOf } from './rendezvous.js';
import { SHARD_MANAGER_KEYS, type ShardAcquiredHook, type ShardAcquireInfo, type ShardCandidateFactory, type ShardEvents, type ShardManagerOptions, type ShardReleasedHook, type ShardReleaseInfo } from './shard-types.js';
import type { TermContext } from './types.js';

export type { ShardAcquiredHook, ShardAcquireInfo, ShardCandidateFactory, ShardEvents, ShardManagerOptions, ShardReleasedHook, ShardReleaseInfo } from './shard-types.js';

/** One shard's place in this process: at most one manager at a time, and a close in progress. */
interface Slot {
  manager?: LeadershipManager;
  closing?: Promise<void>;
  /** When the shard was assigned here (performance.now()), and who owned it before. */
  since?: number;
  from?: string;
  /** Set while its manager closes because the shard went to another member. */
  leaving?: boolean;
  /** Waiting for its manager to start (see #pump). */
  queued?: boolean;
}

/** Campaigns that may be starting at once in one ShardManager (see #pump). */
const START_WINDOW = 64;
/** How long a started campaign holds its place in the window at most, in ms. */
const START_HOLD_MS = 200;

/**
 * One leader per shard: `shards` shards spread over the live members of a {@link Membership} by
 * weighted rendezvous hashing (see `shardOwner`), each member campaigning only for the shards
 * assigned to it. Written against Membership and a candidate factory only, so it is the same on
 * every store. Each shard is a real term run by its own {@link LeadershipManager} (the same
 * drain-before-release lifecycle): `onShardAcquired(shard, ctx)` with the shard's own `signal`
 * and `fence`; when the term ends, its signal aborts first, the drain waits for its work, the
 * lease is released, then `onShardReleased(shard, info)`.
 *
 * When the set changes, a shard this member no longer owns is drained and released here, while
 * its new owner campaigns for it on the store: the store grants it only once the old term's lease
 * is released (or has expired, for an owner that died), so a shard is never held twice. A join
 * moves ≈ 1/M of the shards (to the new member) and nothing else.
 */
export class ShardManager extends EventEmitter<ShardEvents> implements AsyncDisposable {
  /** The membership this member joins and whose live set the shards are spread over. */
  readonly membership: Membership;
  /** How many shards there are. */
  readonly shards: number;
  readonly #factory: ShardCandidateFactory;
  readonly #drainMs: number;
  readonly #settleMs: number;
  #settling: { set: readonly Member[]; timer: NodeJS.Timeout } | undefined;
  readonly #backoff: Required<BackoffOptions>;
  readonly #logger: Logger;
  readonly #acquired: ShardAcquiredHook[] = [];
  readonly #released: ShardReleasedHook[] = [];
  readonly #slots = new Map<number, Slot>();
  readonly #closing = new AbortController();
  #assigned = new Set<number>();
  #members: readonly Member[] | undefined;
  #started = false;
  #loops: Promise<void>[] = [];
  #closed: Promise<void> | undefined;
  readonly #changed = new Set<() => void>();
  readonly #toStart: number[] = [];
  /** Shards whose term's signal has not aborted. */
  readonly #live = new Set<number>();
  #notifying = false;
  #starting = 0;

  constructor(membership: Membership, candidate: ShardCandidateFactory, options: ShardManagerOptions) {
    super();
    const m = membership as Partial<Membership> | null;
    if (!m || typeof m !== 'object' || typeof m.join !== 'function' || typeof m.observe !== 'function' || typeof m.leave !== 'function' || typeof m.id !== 'string') {
      throw new ConfigError('membership', 'must be a Membership (join, members, observe, leave, id)');
    }
    this.membership = membership;
    this.#factory = requireFunction('candidate', candidate);
    if (options === undefined) throw new ConfigError('shards', 'must be given: ShardManager(membership, candidate, { shards })');
    const o = requireOptions('options', options, SHARD_MANAGER_KEYS);
    this.shards = requireNumber('shards', o.shards, { integer: true, min: 1, max: 1 << 20 });
    this.#drainMs = optionalNumber('drainTimeoutMs', o.drainTimeoutMs, 10_000, { integer: true, min: 0, max: 2 ** 31 - 1 });
    this.#backoff = backoffOptions(o.backoff, 'backoff', { initialMs: 100, maxMs: 5000 });
    this.#settleMs = optionalNumber('settleMs', o.settleMs, 250, { integer: true, min: 0, max: 600_000 });
    this.#logger = optionalLogger(o.logger, { component: 'shards', group: membership.group, id: membership.id });
  }

  /** Adds a hook run at the start of every shard term (they run concurrently; the drain waits for all). */
  onShardAcquired(hook: ShardAcquiredHook): this {
    this.#acquired.push(requireFunction('hook', hook));
    return this;
  }

  /** Adds a hook run once per shard term, after its drain and the release of its lease. */
  onShardReleased(hook: ShardReleasedHook): this {
    this.#released.push(requireFunction('hook', hook));
    return this;
  }

  /** Joins the membership and follows it. Throws StateError when started twice, ClosedError after close. */
  start(): this {
    if (this.#closing.signal.aborted) throw new ClosedError('shard manager');
    if (this.#started) throw new StateError('shard manager: already started');
    this.#started = true;
    this.#loops = [this.#join(), this.#follow()];
    return this;
  }

  /** The shards assigned to this member by the last live set it saw, ascending. */
  get assigned(): number[] {
    return [...this.#assigned].sort((a, b) => a - b);
  }

  /** The live members as last seen (undefined before the first reading). */
  get members(): readonly Member[] | undefined {
    return this.#members;
  }

  /** The shards whose term is live here now, ascending. */
  held(): number[] {
    const out: number[] = [];
    for (const [shard, slot] of this.#slots) if (slot.manager?.isLeader()) out.push(shard);
    return out.sort((a, b) => a - b);
  }

  /** The live term of `shard` here, if any. */
  term(shard: number): TermContext | undefined {
    return this.#slots.get(shard)?.manager?.currentTerm;
  }

  /**
   * True when this member is in the live set it last saw, every shard assigned to it has a live
   * term here, and nothing else runs here (no other shard campaigning, draining or leaving).
   */
  get settled(): boolean {
    const id = this.membership.id;
    if (this.#members === undefined || !this.#members.some((m) => m.id === id)) return false;
    // (the terms' signals, not isLeader(): this runs after every acquire and release, and a
    // deadline check per shard each time was seconds of CPU for 1,024 shards)
    if (this.#live.size !== this.#assigned.size) return false;
    for (const s of this.#assigned) if (!this.#live.has(s)) return false;
    for (const [s, slot] of this.#slots) if (!this.#assigned.has(s) || slot.closing) return false;
    return true;
  }

  /** Resolves once {@link settled} (at once when it is now); rejects on close, `signal` or `timeoutMs`. */
  async whenSettled(options?: { signal?: AbortSignal; timeoutMs?: number }): Promise<void> {
    const o = requireOptions('options', options, WAIT_KEYS);
    optionalSignal('signal', o.signal);
    if (this.#closing.signal.aborted) throw new ClosedError('shard manager');
    if (this.settled) return;
    const scope = waitScope('shard manager: whenSettled', { signal: o.signal ? AbortSignal.any([o.signal, this.#closing.signal]) : this.#closing.signal, timeoutMs: o.timeoutMs });
    let check!: () => void;
    try {
      await new Promise<void>((resolve, reject) => {
        check = () => {
          if (scope.signal.aborted) reject(scope.signal.reason);
          else if (this.settled) resolve();
        };
        this.#changed.add(check);
        scope.signal.addEventListener('abort', check, { once: true });
        check();
      });
    } finally {
      this.#changed.delete(check);
      scope.signal.removeEventListener('abort', check);
      scope.dispose();
    }
  }

  /** Leaves the membership, drains and releases every shard held here (`onShardReleased` runs for each). Idempotent. */
  close(): Promise<void> {
    this.#closed ??= (async () => {
      this.#closing.abort(new ClosedError('shard manager'));
      if (this.#settling) clearTimeout(this.#settling.timer);
      // Leave first: the new owners start campaigning while these shards drain.
      const left = this.membership.leave().catch((e: unknown) => this.#error(e));
      this.#assigned = new Set();
      for (const shard of [...this.#slots.keys()]) this.#reconcile(shard);
      await Promise.all(this.#loops);
      await Promise.all([...this.#slots.values()].map((s) => s.closing));
      await left;
    })();
    return this.#closed;
  }

  /** Same as `close()`, for `await using`. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  #error(e: unknown, shard?: number): void {
    this.#logger.warn({ err: e, shard }, 'shards: error');
    if (this.listenerCount('error') > 0) this.emit('error', e, shard);
  }

  /** Tells the whenSettled() waiters, once per turn of the event loop however many shards changed. */
  #notify(): void {
    if (this.#notifying || this.#changed.size === 0) return;
    this.#notifying = true;
    setImmediate(() => {
      this.#notifying = false;
      for (const f of [...this.#changed]) f();
    });
  }

  /** Joins (and stays joined: the membership rejoins by itself); a failed join is retried. */
  async #join(): Promise<void> {
    const closing = this.#closing.signal;
    await retryUntil(() => this.membership.join({ signal: closing }), { signal: closing, retryable: () => true, onRetry: (e) => this.#error(e), ...this.#backoff }).catch(() => undefined); // ends only when closing
  }

  /** Follows the live set; each new set reassigns the shards. */
  async #follow(): Promise<void> {
    const closing = this.#closing.signal;
    const backoff = new Backoff(this.#backoff);
    while (!closing.aborted) {
      try {
        for await (const set of this.membership.observe({ signal: closing })) {
          backoff.reset();
          this.#seen(set);
        }
        if (closing.aborted) break;
      } catch (e) {
        if (closing.aborted) break;
        this.#error(e);
      }
      await backoff.wait(closing).catch(() => undefined);
    }
  }

  /** A new reading of the live set: the first is applied at once, a change once it has held for settleMs. */
  #seen(set: readonly Member[]): void {
    if (this.#settling) clearTimeout(this.#settling.timer);
    this.#settling = undefined;
    if (this.#members === undefined || this.#settleMs === 0) return this.#assign(set);
    if (sameMembers(this.#members, set)) return; // back to what is applied: nothing moves
    const timer = setTimeout(() => {
      this.#settling = undefined;
      this.#assign(set);
    }, this.#settleMs);
    this.#settling = { set, timer };
  }

  #assign(members: readonly Member[]): void {
    if (this.#closing.signal.aborted) return;
    const prev = this.#members;
    if (prev !== undefined && sameMembers(prev, members)) return;
    this.#members = members;
    const next = new Set(shardsOf(this.membership.id, members, this.shards));
    const added = [...next].filter((s) => !this.#assigned.has(s));
    const removed = [...this.#assigned].filter((s) => !next.has(s));
    const now = performance.now();
    // Who owned each added shard before: by the set seen before, or for the first reading, by
    // the set without this member.
    const before = prev ?? members.filter((m) => m.id !== this.membership.id);
    const moved: number[] = [];
    this.#assigned = next;
    for (const s of added) {
      const slot = this.#slot(s);
      slot.since = now;
      const from = shardOwner(s, before)?.id;
      slot.from = from === this.membership.id ? undefined : from;
      if (slot.from !== undefined) moved.push(s);
    }
    if (added.length > 0 || removed.length > 0) {
      this.#logger.info({ members: members.length, assigned: next.size, added: added.length, moved: moved.length, removed: removed.length }, 'shards assigned');
      this.emit('assigned', this.assigned, { added, moved, removed, members });
    }
    for (const s of [...added, ...removed]) this.#reconcile(s);
    this.#notify();
  }

  #slot(shard: number): Slot {
    let slot = this.#slots.get(shard);
    if (!slot) this.#slots.set(shard, (slot = {}));
    return slot;
  }

  /** Brings one shard's manager in line with the assignment: start it, or close it (one at a time). */
  #reconcile(shard: number): void {
    const slot = this.#slot(shard);
    const want = this.#assigned.has(shard) && !this.#closing.signal.aborted;
    if (slot.closing) return; // reconciled again once the close is done
    if (want && !slot.manager) {
      if (!slot.queued) {
        slot.queued = true;
        this.#toStart.push(shard);
        this.#pump();
      }
    } else if (!want && slot.manager) {
      const m = slot.manager;
      slot.leaving = !this.#closing.signal.aborted;
      slot.closing = m.close().then(() => {
        slot.manager = undefined;
        slot.closing = undefined;
        slot.leaving = false;
        if (!this.#assigned.has(shard) && !slot.manager) this.#slots.delete(shard);
        this.#reconcile(shard);
        this.#notify();
      });
    } else if (!want && !slot.manager) {
      this.#slots.delete(shard);
    }
  }

  /**
   * Starts the queued shards' managers, at most START_WINDOW campaigns starting at once: each
   * holds its place until its first term begins or START_HOLD_MS pass (a campaign queued behind a
   * holder waits long, and costs nothing meanwhile; held for a whole second, the shards queued
   * behind a crashed member's expiring lease started seconds late and failed over past TTL + 3 s). Thousands of campaigns started in one
   * burst on one session overloaded the store and starved the session's keepalive until its lease
   * was lost (etcd: 1,024 at once on a loaded 2-core machine; see chaos/RESULTS.md).
   */
  #pump(): void {
    while (this.#starting < START_WINDOW && this.#toStart.length > 0) {
      const shard = this.#toStart.shift()!;
      const slot = this.#slots.get(shard);
      if (!slot) continue;
      slot.queued = false;
      if (!this.#assigned.has(shard) || this.#closing.signal.aborted || slot.manager || slot.closing) continue;
      let m: LeadershipManager;
      try {
        m = slot.manager = this.#manager(shard, slot);
        m.start();
      } catch (e) {
        slot.manager = undefined;
        this.#error(e, shard);
        // A factory that throws is tried again after a pause.
        setTimeout(() => this.#reconcile(shard), this.#backoff.initialMs).unref();
        continue;
      }
      this.#starting++;
      let held = true;
      const done = (): void => {
        if (!held) return;
        held = false;
        clearTimeout(timer);
        m.off('elected', done);
        this.#starting--;
        this.#pump();
      };
      const timer = setTimeout(done, START_HOLD_MS);
      timer.unref();
      m.once('elected', done);
    }
  }

  #manager(shard: number, slot: Slot): LeadershipManager {
    const logger = this.#logger.child({ shard });
    const m = new LeadershipManager(this.#factory(shard), { drainTimeoutMs: this.#drainMs, backoff: this.#backoff, observeLeader: false, logger });
    m.onElected((ctx) => {
      const info: ShardAcquireInfo = Object.freeze({ waitedMs: performance.now() - (slot.since ?? performance.now()), from: slot.since === undefined ? undefined : slot.from });
      slot.since = undefined;
      this.#live.add(shard);
      ctx.signal.addEventListener('abort', () => this.#live.delete(shard), { once: true });
      this.emit('shardAcquired', shard, ctx, info);
      this.#notify();
      // (run inside the term, as the manager runs its own hooks: currentTerm() is this term)
      return Promise.all(this.#acquired.map(async (hook) => hook(shard, ctx)));
    });
    m.onDemoted(async (d) => {
      const info: ShardReleaseInfo = Object.freeze({ ...d, moved: slot.leaving === true });
      for (const hook of this.#released) {
        try {
          await hook(shard, info);
        } catch (e) {
          this.#error(e, shard);
        }
      }
      this.emit('shardReleased', shard, info);
      this.#notify();
    });
    m.on('error', (e) => this.#error(e, shard));
    return m;
  }
}
