import { LeaseEmitter } from '../../core/lease-events.js';
import { validateAcl, type ZkAcl } from './acl.js';
import { waitScope } from '../../core/abort.js';
import type { Candidate, LeaderInfo } from '../../core/candidate.js';
import { BusyError, type LeaseLostError } from '../../core/errors.js';
import type { Lease, LeaseController } from '../../core/lease.js';
import { SIGNAL_KEYS, WAIT_KEYS, type WaitOptions } from '../../core/options.js';
import { optionalEnum, optionalId, optionalSignal, requireOptions } from '../../core/validate.js';
import { StandardLockDriver } from './drivers.js';
import { CloseGuard, requireSession } from './guard.js';
import { LockInternals } from './internals.js';
import { observeLeader, readLeader, readParticipants, type Participant } from './leader.js';
import { validatePath } from './paths.js';
import type { ZkSession } from './session.js';

/** Whether `close()` fires `released` when it ends a term (Curator's CloseMode). */
export type CloseMode = 'silent' | 'notifyLeader';

/** Options of a {@link LeaderLatch}. */
export interface LeaderLatchOptions {
  /** This participant's id, stored in its node; what `leader()` shows. @default a random UUID */
  id?: string;
  /** @default 'silent' */
  closeMode?: CloseMode;
  /** The ACL of the nodes this latch creates (e.g. `[digestAcl(user, password)]`). @default the session's `acl` */
  acl?: ZkAcl[];
}


const driver = new StandardLockDriver('latch-');

/**
 * Leader election by latch (Curator's LeaderLatch, same node layout `…/_c_<guid>-latch-<seq>`):
 * `campaign()` queues a node and resolves when it is first; the term ends on release, close,
 * SUSPENDED under the standard policy, LOST or the local deadline, and its node is deleted. After
 * any loss the next `campaign()` queues again (on the session's new ZooKeeper session after
 * LOST).
 */
export class LeaderLatch extends LeaseEmitter implements Candidate {
  /** The latch path. */
  readonly path: string;
  readonly id: string;
  readonly #session: ZkSession;
  readonly #internals: LockInternals;
  readonly #closeMode: CloseMode;
  readonly #guard: CloseGuard;
  #term: LeaseController | undefined;
  #ourPath: string | undefined;
  /** The node's data: the id, made once. */
  readonly #data: Buffer;
  #campaigning = false;
  #silentClose = false;

  constructor(session: ZkSession, path: string, options?: LeaderLatchOptions) {
    super();
    this.#session = requireSession(session);
    this.path = validatePath('path', path);
    const o = requireOptions('options', options, { id: true, closeMode: true, acl: true });
    this.id = optionalId(o.id);
    this.#data = Buffer.from(this.id);
    this.#closeMode = optionalEnum('closeMode', o.closeMode, ['silent', 'notifyLeader'] as const, 'silent');
    this.#internals = new LockInternals(this.#session, this.path, validateAcl(o.acl) ?? this.#session.acl);
    this.#guard = new CloseGuard(`leader latch ${this.path}`);
  }

  /** The election's name: its path. */
  get name(): string {
    return this.path;
  }

  /** True while leading (the term's signal has not aborted). */
  hasLeadership(): boolean {
    return this.#term !== undefined && !this.#term.lease.lost;
  }

  /** The current term, while leading. */
  get term(): Lease | undefined {
    return this.hasLeadership() ? this.#term?.lease : undefined;
  }

  /** Full path of our current node, while queued or leading. */
  get ourPath(): string | undefined {
    return this.#ourPath;
  }

  /**
   * Queues (one node) and resolves with the term once this latch is first. While leading it
   * resolves with the live term. An aborted or timed-out campaign deletes its node first.
   */
  async campaign(options?: WaitOptions): Promise<Lease> {
    const o = requireOptions('options', options, WAIT_KEYS);
    optionalSignal('signal', o.signal);
    this.#guard.throwIfClosed();
    const live = this.term;
    if (live) return live;
    if (this.#campaigning) throw new BusyError(`${this.#guard.what}: a campaign is already in flight on this latch`);
    this.#campaigning = true;
    const scope = waitScope(`${this.#guard.what}: campaign`, { signal: this.#guard.join(o.signal), timeoutMs: o.timeoutMs });
    try {
      const held = await this.#internals.acquire(driver, scope.signal, this.#data, (p) => (this.#ourPath = p));
      const term = this.#internals.lease(this.path, held, () => this.#ended(term));
      if (scope.signal.aborted) {
        await this.#internals.giveBack(term); // won just as the caller gave up
        throw scope.signal.reason;
      }
      this.#term = term;
      this.#session.logger.debug({ path: held.path }, 'latch: term begins');
      return this.announce(term.lease, () => this.#guard.closed && this.#silentClose);
    } catch (e) {
      this.#ourPath = undefined;
      throw e;
    } finally {
      this.#campaigning = false;
      scope.dispose();
    }
  }

  #ended(term: LeaseController): void {
    if (this.#term !== term) return;
    this.#term = undefined;
    this.#ourPath = undefined;
    const reason = term.lease.signal.reason as LeaseLostError;
    this.#session.logger.debug({ reason: reason?.reason }, 'latch: term ends');
  }

  /** Ends the current term, if any (its node is deleted); the latch stays usable. */
  async resign(): Promise<void> {
    await this.#term?.release();
  }

  /** Every participant in queue order; the first is the leader. */
  participants(options?: WaitOptions): Promise<Participant[]> {
    this.#guard.throwIfClosed();
    return this.#read(options, (signal) => readParticipants(this.#session, this.path, driver.queueNames, signal));
  }

  /** The current leader (id and fence, the czxid of its node), or undefined when nobody is queued. */
  leader(options?: WaitOptions): Promise<LeaderInfo | undefined> {
    this.#guard.throwIfClosed();
    return this.#read(options, (signal) => readLeader(this.#session, this.path, driver.queueNames, signal));
  }

  /** Leader changes: the current leader first (undefined when nobody is queued), then every change. */
  observe(options?: { signal?: AbortSignal }): AsyncGenerator<LeaderInfo | undefined, void, undefined> {
    const o = requireOptions('options', options, SIGNAL_KEYS);
    const signal = optionalSignal('signal', o.signal) ?? new AbortController().signal;
    return observeLeader(this.#session, this.path, driver.queueNames, signal);
  }

  async #read<T>(options: WaitOptions | undefined, read: (signal: AbortSignal) => Promise<T>): Promise<T> {
    const o = requireOptions('options', options, WAIT_KEYS);
    const scope = waitScope(`${this.#guard.what}: read`, { signal: this.#guard.join(optionalSignal('signal', o.signal)), timeoutMs: o.timeoutMs });
    try {
      return await read(scope.signal);
    } finally {
      scope.dispose();
    }
  }

  /** Leaves the election (a campaign in flight rejects with ClosedError), ends the term. Idempotent. */
  async close(closeMode: CloseMode = this.#closeMode): Promise<void> {
    this.#silentClose = closeMode === 'silent';
    if (!this.#guard.close()) return;
    await this.#term?.release();
  }

  /** Same as `close()`, for `await using`. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }
}

export type { Participant };
