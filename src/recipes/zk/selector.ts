import { EventEmitter } from 'eventemitter3';
import { sleep } from '../../core/abort.js';
import { ConfigError } from '../../core/errors.js';
import type { Lease } from '../../core/lease.js';
import { optionalBoolean, optionalString, requireFunction, requireOptions } from '../../core/validate.js';
import { CloseGuard, requireSession } from './guard.js';
import { InterProcessMutex } from './mutex.js';
import { zkGetData } from './ops.js';
import { validatePath } from './paths.js';
import type { Participant } from './latch.js';
import type { ZkSession } from './session.js';

/** What `takeLeadership` gets for one term. */
export interface LeadershipContext {
  /** Aborts when the term ends: lease lost (per the session's policy), `interruptLeadership()`, `close()`. */
  readonly signal: AbortSignal;
  /** The term's fencing token (the mutex node's czxid). */
  readonly fence: bigint;
  /** The term as a Lease (for `throwIfLost()` and `remainingMs()`). */
  readonly lease: Lease;
}

export interface LeaderSelectorOptions {
  /** Runs for one term; leadership lasts until it settles. It must stop when `ctx.signal` aborts. */
  takeLeadership: (ctx: LeadershipContext) => Promise<void>;
  /** Queue again after every term (otherwise call `requeue()`). @default false */
  autoRequeue?: boolean;
  /** This participant's id. @default the session id */
  id?: string;
}

export interface LeaderSelectorEvents {
  /** `takeLeadership` threw; the term ended. */
  error: (e: unknown) => void;
}

/**
 * Leader election by mutex (Curator's LeaderSelector): queue on an {@link InterProcessMutex};
 * the holder runs `takeLeadership({ signal, fence })` and keeps leadership until it returns. The
 * mutex is released when it settles; with `autoRequeue` the selector queues again.
 */
export class LeaderSelector extends EventEmitter<LeaderSelectorEvents> implements AsyncDisposable {
  readonly path: string;
  readonly #session: ZkSession;
  readonly #take: (ctx: LeadershipContext) => Promise<void>;
  readonly #autoRequeue: boolean;
  readonly #id: string | undefined;
  readonly #guard: CloseGuard;
  #started = false;
  #queued = false;
  #leading = false;
  #interrupt: AbortController | undefined;
  #mutex: InterProcessMutex | undefined;
  #loop: Promise<void> | undefined;

  constructor(session: ZkSession, path: string, options: LeaderSelectorOptions) {
    super();
    this.#session = requireSession(session);
    this.path = validatePath('path', path);
    const o = requireOptions('options', options);
    this.#take = requireFunction('takeLeadership', o.takeLeadership);
    this.#autoRequeue = optionalBoolean('autoRequeue', o.autoRequeue, false);
    this.#id = o.id === undefined ? undefined : optionalString('id', o.id, '');
    this.#guard = new CloseGuard(`leader selector ${this.path}`);
  }

  get id(): string {
    return this.#id ?? this.#session.sessionId ?? '';
  }

  /** Joins the queue. Throws when started twice or after close. */
  start(): void {
    this.#guard.throwIfClosed();
    if (this.#started) throw new ConfigError('start', 'leader selector already started');
    this.#started = true;
    this.requeue();
  }

  /** Queues again if not queued or leading now. Returns false when it already was (or is closed). */
  requeue(): boolean {
    this.#guard.throwIfClosed();
    if (!this.#started) throw new ConfigError('requeue', 'leader selector not started');
    if (this.#queued) return false;
    this.#queued = true;
    this.#loop = this.#run();
    return true;
  }

  /** True while `takeLeadership` runs with an un-aborted signal. */
  hasLeadership(): boolean {
    return this.#leading && this.#interrupt !== undefined && !this.#interrupt.signal.aborted;
  }

  /** Aborts the current term's signal (the mutex is released once `takeLeadership` settles). */
  interruptLeadership(): void {
    this.#interrupt?.abort(new ConfigError('interruptLeadership', 'leadership interrupted'));
  }

  /** Every participant in queue order; the first leads. */
  async getParticipants(): Promise<Participant[]> {
    this.#guard.throwIfClosed();
    const mutex = this.#mutex ?? new InterProcessMutex(this.#session, this.path);
    const out: Participant[] = [];
    for (const p of await mutex.getParticipantNodes()) {
      const data = await zkGetData(this.#session.client, p);
      if (data !== null) out.push({ id: data.toString('utf8'), path: p, isLeader: out.length === 0 });
    }
    return out;
  }

  /** Leaves the queue, interrupts a running term and waits for it to settle. Idempotent. */
  async close(): Promise<void> {
    if (!this.#guard.close()) return;
    this.interruptLeadership();
    await this.#loop;
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  async #run(): Promise<void> {
    const stop = this.#guard.signal;
    try {
      do {
        const mutex = new InterProcessMutex(this.#session, this.path, Buffer.from(this.id));
        this.#mutex = mutex;
        try {
          const lease = await mutex.acquire({ signal: stop });
          const interrupt = new AbortController();
          this.#interrupt = interrupt;
          this.#leading = true;
          try {
            await this.#take({ signal: AbortSignal.any([lease.signal, interrupt.signal, stop]), fence: lease.fence, lease });
          } catch (e) {
            if (!stop.aborted) this.emit('error', e);
          } finally {
            this.#leading = false;
            interrupt.abort();
            await lease.release().catch(() => undefined);
          }
        } catch (e) {
          if (stop.aborted || this.#session.closed) break;
          this.emit('error', e);
          await sleep(200, stop).catch(() => undefined);
        } finally {
          await mutex.close();
        }
      } while (this.#autoRequeue && !stop.aborted);
    } finally {
      this.#queued = false;
    }
  }
}
