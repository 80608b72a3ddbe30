import type { LeaderInfo } from '../core/candidate.js';
import type { LeaseLostReason, TermEndReason } from '../core/errors.js';
import type { Lease } from '../core/lease.js';

/**
 * Why a term ended, as `onDemoted` hears it: `lost` (the lease was lost or may be lost — see
 * `lostReason`), `resigned`, `closed`, `hook-error` (an `onElected` hook threw), `hook-returned`
 * (with `releaseOnReturn`, every hook returned).
 */
export type DemotionReason = TermEndReason;

/** What `onElected` (and work tracked with the term) gets for one term. */
export interface TermContext {
  /**
   * Aborts the moment the term ends, for any reason, before anything else happens: pass it to
   * every call made for the term. Its reason is a TermEndedError.
   */
  readonly signal: AbortSignal;
  /** The term's fencing token: send it with every write to a fenced resource. */
  readonly fence: bigint;
  /** The term as the candidate's Lease (`throwIfLost()`, `remainingMs()`). */
  readonly term: Lease;
  /**
   * Registers work with the term: the drain after the term ends waits for it (up to
   * `drainTimeoutMs`) before the lease is released. Returns the work's own promise.
   */
  track<T>(work: Promise<T> | (() => Promise<T>)): Promise<T>;
}

/** What `onDemoted` hears, once per term, after the drain. */
export interface DemotionInfo {
  /** Why the term ended (`lost`, `resigned`, `closed`, `hook-error`, `hook-returned`). */
  readonly reason: DemotionReason;
  /** For `reason: 'lost'`, why the lease ended (`deadline`, `expired`, `suspended`, …). */
  readonly lostReason: LeaseLostReason | undefined;
  /** The ended term's fence. */
  readonly fence: bigint;
  /** How long the drain (hooks and tracked work settling) took, in ms. */
  readonly drainedMs: number;
  /** True when work was still running at `drainTimeoutMs` (it is reported; the fence stops its late writes). */
  readonly timedOut: boolean;
  /** The hook's error, for `reason: 'hook-error'`. */
  readonly error: unknown;
}

/** The manager's states: follower → campaigning → leader → draining → follower … | closed. */
export type LeadershipState = 'follower' | 'campaigning' | 'leader' | 'draining' | 'closed';

/** The typed events of a LeadershipManager (an eventemitter3 event map). */
export interface LeadershipEvents {
  /** A term began; `onElected` hooks are running. */
  elected: (ctx: TermContext) => void;
  /** A term ended and drained; `onDemoted` hooks ran. */
  demoted: (info: DemotionInfo) => void;
  /** The observed leader changed (any participant; undefined when nobody leads). */
  leaderChanged: (leader: LeaderInfo | undefined) => void;
  /** Every state edge. */
  state: (state: LeadershipState, previous: LeadershipState) => void;
  /** A hook threw, a campaign failed, work outlived its drain: the manager carries on. */
  error: (error: unknown) => void;
}
