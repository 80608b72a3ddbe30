import { monotonicNs } from '../../core/clock.js';
import { LeaseLostError, TenureError, TermEndedError } from '../../core/errors.js';
import type { Lease } from '../../core/lease.js';
import type { LeadershipManager } from '../../lifecycle/manager.js';
import type { ShardManager } from '../../lifecycle/shards.js';
import { optionalNumber, optionalSignal, requireFunction, requireOptions, requireString } from '../../core/validate.js';
import type { HistoryOp } from './types.js';

/** Options of a {@link HistoryRecorder}. */
export interface HistoryRecorderOptions {
  /** Receives each entry as it is recorded (e.g. sends it to a parent process). @default kept in `ops` */
  sink?: (op: HistoryOp) => void;
  /** How often a held term's local deadline is sampled, in ms. @default 5 */
  deadlineSampleMs?: number;
  /** The shard every entry is about (a ShardManager's history; see {@link HistoryRecorder.forShard}). @default none */
  shard?: string;
}

type Entry = Omit<HistoryOp, 't' | 'process'>;

/** A write error that proves the write was not applied; any other leaves its outcome unknown. */
function definitelyRefused(e: unknown): boolean {
  return e instanceof TenureError && (e.code === 'STALE_FENCE' || e.code === 'CONFIG_INVALID');
}

const message = (e: unknown): string => (e instanceof Error ? `${e.name}: ${e.message}` : String(e)).slice(0, 300);

/**
 * A term's end in the checker's words: a lease's loss reason; a manager term given up by its
 * holder (resigned, closed, its hooks returned) is `released`, as a released lease is, and one
 * lost is its lease's loss reason.
 */
function endReason(r: unknown): string {
  if (r instanceof LeaseLostError) return r.reason;
  if (r instanceof TermEndedError) return r.reason === 'lost' ? (r.lostReason ?? 'lost') : r.reason === 'hook-error' ? 'hook-error' : 'released';
  return message(r);
}

/**
 * Records one process's part of a history for {@link checkHistory}: wrap each acquire, fenced
 * write and release in it, and it logs the invocation and the completion, stamped with the
 * system-wide monotonic clock. A granted lease is followed by itself: its local deadline is
 * sampled while it lasts (so a holder frozen past it is known to have ended there) and its
 * signal's abort is logged as the term's end.
 *
 * ```ts
 * const rec = new HistoryRecorder('worker-1');
 * const lease = await rec.acquire(() => election.campaign());
 * await rec.write('ledger', 'w-1', lease.fence, () => ledger.write(lease.fence, apply));
 * await rec.release(lease);
 * checkHistory({ ops: [...rec.ops, ...otherProcessesOps] });
 * ```
 */
export class HistoryRecorder {
  /** The process name every entry carries. */
  readonly process: string;
  /** What was recorded, when no `sink` was given. */
  readonly ops: HistoryOp[] = [];
  /** The shard every entry is about, for a shard's recorder. */
  readonly shard: string | undefined;
  readonly #sink: (op: HistoryOp) => void;
  readonly #sampleMs: number;
  readonly #shards = new Map<string, HistoryRecorder>();

  constructor(process: string, options?: HistoryRecorderOptions) {
    this.process = requireString('process', process, { maxLength: 200 });
    const o = requireOptions('options', options, { sink: true, deadlineSampleMs: true, shard: true });
    if (o.sink !== undefined) requireFunction('sink', o.sink);
    this.#sink = o.sink ?? ((op) => this.ops.push(op));
    this.#sampleMs = optionalNumber('deadlineSampleMs', o.deadlineSampleMs, 5, { min: 1 });
    this.shard = o.shard === undefined ? undefined : requireString('shard', o.shard, { maxLength: 200 });
  }

  /** Records one entry now. */
  record(entry: Entry): HistoryOp {
    const op = { t: monotonicNs(), process: this.process, ...(this.shard === undefined ? {} : { shard: this.shard }), ...entry } as HistoryOp;
    this.#sink(op);
    return op;
  }

  /**
   * The recorder of one shard of this process (made once per shard): the same process and sink,
   * every entry marked with the shard, so that the checker holds each shard to the rules on its
   * own. Name each shard's registers apart (`ledger/17`).
   */
  forShard(shard: number | string): HistoryRecorder {
    const key = String(shard);
    let r = this.#shards.get(key);
    if (!r) this.#shards.set(key, (r = new HistoryRecorder(this.process, { sink: this.#sink, deadlineSampleMs: this.#sampleMs, shard: key })));
    return r;
  }

  /** Runs an acquire or campaign, logging it; a granted lease is then followed (see the class note). */
  async acquire(fn: () => Promise<Lease>): Promise<Lease> {
    this.record({ type: 'invoke', f: 'acquire' });
    let lease: Lease;
    try {
      lease = await fn();
    } catch (e) {
      this.record({ type: 'fail', f: 'acquire', error: message(e) });
      throw e;
    }
    this.record({ type: 'ok', f: 'acquire', fence: lease.fence });
    this.follow(lease);
    return lease;
  }

  /**
   * Runs a fenced write, logging it: `ok`, `fail` when the resource refused it (`stale` when for
   * its fence), `info` when the outcome is unknown (a connection error, say).
   */
  async write<T>(register: string, id: string, fence: bigint, fn: () => Promise<T>): Promise<T> {
    this.record({ type: 'invoke', f: 'write', register, id, fence });
    try {
      const v = await fn();
      this.record({ type: 'ok', f: 'write', register, id, fence });
      return v;
    } catch (e) {
      const refused = definitelyRefused(e);
      const stale = e instanceof TenureError && e.code === 'STALE_FENCE';
      this.record({ type: refused ? 'fail' : 'info', f: 'write', register, id, fence, error: message(e), ...(stale ? { stale } : {}) });
      throw e;
    }
  }

  /** Releases (resigns) a term, logging it. */
  async release(lease: Lease, fn: () => Promise<void> = () => lease.release()): Promise<void> {
    this.record({ type: 'invoke', f: 'release', fence: lease.fence });
    try {
      await fn();
      this.record({ type: 'ok', f: 'release', fence: lease.fence });
    } catch (e) {
      this.record({ type: 'info', f: 'release', fence: lease.fence, error: message(e) });
      throw e;
    }
  }

  /**
   * Follows a lease granted elsewhere (`acquire` does this itself): logs its local deadline each
   * time it moves and its end when `options.signal` aborts — the lease's own signal unless the
   * term has one of its own (a {@link LeadershipManager} term's `ctx.signal`, which aborts first).
   */
  follow(lease: Lease, options?: { signal?: AbortSignal }): void {
    const signal = optionalSignal('signal', requireOptions('options', options, { signal: true }).signal) ?? lease.signal;
    const fence = lease.fence;
    let reported = -1n;
    const sample = (): void => {
      // `lost` checks the deadline first: a holder that wakes past it (SIGSTOP, a long GC) must
      // not report "now" as its deadline; its last report before the freeze stands.
      if (lease.lost) return;
      const remaining = lease.remainingMs();
      if (!Number.isFinite(remaining) || remaining <= 0) return;
      const deadline = monotonicNs() + BigInt(Math.round(remaining * 1e6));
      // Only moves of more than 1 ms: the two clock reads differ by microseconds each time.
      if (deadline > reported + 1_000_000n) {
        reported = deadline;
        this.record({ type: 'info', f: 'deadline', fence, deadline });
      }
    };
    const onEnd = (): void => {
      clearInterval(timer);
      this.record({ type: 'info', f: 'term-end', fence, error: endReason(signal.reason) });
    };
    sample();
    const timer = setInterval(sample, this.#sampleMs);
    timer.unref();
    if (signal.aborted) onEnd();
    else signal.addEventListener('abort', onEnd, { once: true });
  }

  /**
   * Records a {@link LeadershipManager}'s terms (call before `start()`): each campaign as an
   * `acquire` (invoked when the manager starts campaigning, `ok` with the fence at `elected`,
   * `fail` when it stops campaigning otherwise), and each term followed with the term's own
   * signal, so the history ends it where the manager says it ended. Wrap `manager.resign()` in
   * {@link release} to log the hand-over. Returns a function that stops recording.
   */
  followManager(manager: Pick<LeadershipManager, 'on' | 'off'>): () => void {
    let campaigning = false;
    let lastError: unknown;
    const onState = (next: string): void => {
      if (next === 'campaigning') {
        campaigning = true;
        lastError = undefined;
        this.record({ type: 'invoke', f: 'acquire' });
      } else if (campaigning && next !== 'leader') {
        campaigning = false;
        this.record({ type: 'fail', f: 'acquire', error: lastError === undefined ? `stopped campaigning: ${next}` : message(lastError) });
      }
    };
    const onError = (e: unknown): void => {
      if (campaigning) lastError = e;
    };
    const onElected = (ctx: { fence: bigint; signal: AbortSignal; term: Lease }): void => {
      campaigning = false;
      this.record({ type: 'ok', f: 'acquire', fence: ctx.fence });
      this.follow(ctx.term, { signal: ctx.signal });
    };
    manager.on('state', onState);
    manager.on('error', onError);
    manager.on('elected', onElected);
    return () => {
      manager.off('state', onState);
      manager.off('error', onError);
      manager.off('elected', onElected);
    };
  }

  /**
   * Records a {@link ShardManager}'s shard terms (call before `start()`), each in its shard's
   * recorder: a campaign as an `acquire` (invoked when the shard is assigned here, and again after
   * a lost term; `ok` with the fence when its term begins; `fail` when it is assigned away first),
   * each term followed with the term's own signal, and a shard moved away while held as a
   * `release` (invoked when assigned away, `ok` once drained and released). Returns a function
   * that stops recording.
   */
  followShards(shards: Pick<ShardManager, 'on' | 'off' | 'assigned'>): () => void {
    const campaigning = new Set<number>();
    const held = new Map<number, bigint>();
    const leaving = new Set<number>();
    const onAssigned = (_all: readonly number[], change: { added: readonly number[]; removed: readonly number[] }): void => {
      for (const s of change.added) {
        if (campaigning.has(s) || held.has(s)) continue;
        campaigning.add(s);
        this.forShard(s).record({ type: 'invoke', f: 'acquire' });
      }
      for (const s of change.removed) {
        if (campaigning.delete(s)) this.forShard(s).record({ type: 'fail', f: 'acquire', error: 'assigned to another member' });
        const fence = held.get(s);
        if (fence !== undefined && !leaving.has(s)) {
          leaving.add(s);
          this.forShard(s).record({ type: 'invoke', f: 'release', fence });
        }
      }
    };
    const onAcquired = (s: number, ctx: { fence: bigint; signal: AbortSignal; term: Lease }): void => {
      const rec = this.forShard(s);
      if (!campaigning.delete(s)) rec.record({ type: 'invoke', f: 'acquire' });
      held.set(s, ctx.fence);
      rec.record({ type: 'ok', f: 'acquire', fence: ctx.fence });
      rec.follow(ctx.term, { signal: ctx.signal });
    };
    const onReleased = (s: number, info: { fence: bigint }): void => {
      if (held.get(s) === info.fence) held.delete(s);
      if (leaving.delete(s)) this.forShard(s).record({ type: 'ok', f: 'release', fence: info.fence });
      // Still assigned here: the shard's manager campaigns again.
      else if (shards.assigned.includes(s) && !campaigning.has(s)) {
        campaigning.add(s);
        this.forShard(s).record({ type: 'invoke', f: 'acquire' });
      }
    };
    shards.on('assigned', onAssigned);
    shards.on('shardAcquired', onAcquired);
    shards.on('shardReleased', onReleased);
    return () => {
      shards.off('assigned', onAssigned);
      shards.off('shardAcquired', onAcquired);
      shards.off('shardReleased', onReleased);
    };
  }

  /** Records a fault the nemesis started or healed, done to `target` when it was done to one process. */
  fault(kind: string, phase: 'start' | 'end', target?: string, detail?: string): HistoryOp {
    return this.record({ type: 'info', f: 'fault', fault: kind, phase, ...(target === undefined ? {} : { target }), ...(detail === undefined ? {} : { error: detail }) });
  }
}
