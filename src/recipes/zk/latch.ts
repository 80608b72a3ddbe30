import { EventEmitter } from 'eventemitter3';
import { raceSignal, sleep, waitScope, whenAborted } from '../../core/abort.js';
import type { Candidate } from '../../core/candidate.js';
import { ConfigError, PermissionDeniedError, type LeaseLostError } from '../../core/errors.js';
import type { Lease, LeaseController } from '../../core/lease.js';
import { optionalEnum, optionalString, requireOptions } from '../../core/validate.js';
import { StandardLockDriver } from './drivers.js';
import { CloseGuard, requireSession } from './guard.js';
import { LockInternals } from './internals.js';
import { zkGetData } from './ops.js';
import { validatePath } from './paths.js';
import type { ZkSession } from './session.js';

/** Whether `close()` fires `notLeader` when it ends a term. */
export type CloseMode = 'silent' | 'notifyLeader';

export interface LeaderLatchOptions {
  /** This participant's id, stored in its node; what `getLeader()` returns. @default the session id */
  id?: string;
  /** @default 'silent' */
  closeMode?: CloseMode;
}

export interface Participant {
  id: string;
  path: string;
  isLeader: boolean;
}

export interface LeaderLatchEvents {
  /**
   * Leadership gained (an edge; fires once per term). By the time a handler runs, leadership may
   * already be lost again: check `term.signal`.
   */
  isLeader: (term: Lease) => void;
  /** Leadership ended (an edge; fires once per term). */
  notLeader: (reason: LeaseLostError | undefined) => void;
  /** An unexpected error in the participation loop (it retries). */
  error: (e: unknown) => void;
}

const driver = new StandardLockDriver('latch-');

/**
 * Leader election by latch (Curator's LeaderLatch): every participant queues a node; the first
 * one leads until its term ends (close, SUSPENDED under the standard policy, LOST, local
 * deadline). After a term ends the latch re-joins with a new node, by itself, until closed.
 */
export class LeaderLatch extends EventEmitter<LeaderLatchEvents> implements Candidate, AsyncDisposable {
  readonly path: string;
  readonly #session: ZkSession;
  readonly #internals: LockInternals;
  readonly #idOption: string | undefined;
  readonly #closeMode: CloseMode;
  readonly #guard: CloseGuard;
  #started = false;
  #term: LeaseController | undefined;
  #ourPath: string | undefined;
  #loop: Promise<void> | undefined;
  #silentClose = false;
  /** Aborts (reason PermissionDeniedError) when the latch's ACL refuses this session. */
  readonly #denied = new AbortController();

  constructor(session: ZkSession, path: string, options?: LeaderLatchOptions) {
    super();
    this.#session = requireSession(session);
    this.path = validatePath('path', path);
    const o = requireOptions('options', options);
    this.#idOption = o.id === undefined ? undefined : optionalString('id', o.id, '');
    this.#closeMode = optionalEnum('closeMode', o.closeMode, ['silent', 'notifyLeader'] as const, 'silent');
    this.#internals = new LockInternals(this.#session, this.path);
    this.#guard = new CloseGuard(`leader latch ${this.path}`);
  }

  /** This participant's id. */
  get id(): string {
    return this.#idOption ?? this.#session.sessionId ?? '';
  }

  /** Joins the election. Throws when started twice or after close. */
  start(): void {
    this.#guard.throwIfClosed();
    if (this.#started) throw new ConfigError('start', 'leader latch already started');
    this.#started = true;
    this.#loop = this.#run();
  }

  /** True while leading (the term's signal has not aborted). */
  hasLeadership(): boolean {
    return this.#term !== undefined && !this.#term.lease.lost;
  }

  /** The current term, while leading. */
  get term(): Lease | undefined {
    return this.hasLeadership() ? this.#term?.lease : undefined;
  }

  /** Full path of our current node, once queued. */
  get ourPath(): string | undefined {
    return this.#ourPath;
  }

  /** Resolves with the term once leading (at once if leading now). */
  async await(options: { signal?: AbortSignal; timeoutMs?: number } = {}): Promise<Lease> {
    this.#guard.throwIfClosed();
    this.#denied.signal.throwIfAborted();
    const joined = this.#guard.join(options.signal);
    const scope = waitScope(`${this.#guard.what}: await`, { signal: AbortSignal.any([joined, this.#denied.signal]), timeoutMs: options.timeoutMs });
    try {
      for (;;) {
        const t = this.term;
        if (t) return t;
        await raceSignal(new Promise<void>((r) => this.once('isLeader', () => r())), scope.signal);
      }
    } finally {
      scope.dispose();
    }
  }

  /** Candidate: starts the latch if needed and waits for leadership. */
  campaign(options: { signal?: AbortSignal } = {}): Promise<Lease> {
    if (!this.#started) this.start();
    return this.await(options);
  }

  /** Every participant in queue order; the first is the leader. */
  async getParticipants(): Promise<Participant[]> {
    this.#guard.throwIfClosed();
    const paths = await this.#internals.participants(driver.queueNames);
    const client = this.#session.client;
    const out: Participant[] = [];
    for (const p of paths) {
      const data = await zkGetData(client, p);
      if (data !== null) out.push({ id: data.toString('utf8'), path: p, isLeader: out.length === 0 });
    }
    return out;
  }

  /** The current leader, or undefined when nobody is queued. */
  async getLeader(): Promise<Participant | undefined> {
    return (await this.getParticipants())[0];
  }

  /** Leaves the election, deleting our node; ends the term. Idempotent. */
  async close(closeMode: CloseMode = this.#closeMode): Promise<void> {
    if (!this.#guard.close()) return;
    const term = this.#term;
    this.#silentClose = closeMode === 'silent';
    await term?.release();
    await this.#loop;
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  async #run(): Promise<void> {
    const stop = this.#guard.signal;
    while (!stop.aborted) {
      try {
        const held = await this.#internals.acquire(driver, stop, Buffer.from(this.id), (p) => (this.#ourPath = p));
        const term = this.#internals.lease(this.path, held);
        this.#term = term;
        this.#session.log.debug({ path: held.path, ended: term.ended }, 'latch: term begins');
        if (!term.ended) this.emit('isLeader', term.lease);
        await whenAborted(term.lease.signal);
        this.#session.log.debug({ path: held.path, reason: String((term.lease.signal.reason as Error)?.message) }, 'latch: term ends');
        this.#term = undefined;
        this.#ourPath = undefined;
        if (!(stop.aborted && this.#silentClose)) this.emit('notLeader', term.lease.signal.reason as LeaseLostError);
        await term.release().catch(() => undefined);
      } catch (e) {
        if (stop.aborted || this.#session.closed) break;
        this.emit('error', e);
        if (e instanceof PermissionDeniedError) {
          // The same credentials get the same answer: stop, and let waiters hear why.
          this.#denied.abort(e);
          break;
        }
        await sleep(200, stop).catch(() => undefined);
      }
    }
  }
}
