import { performance } from 'node:perf_hooks';
import { LeaseLostError, NotLeaderError, TermEndedError, type TermEndReason } from '../core/errors.js';
import type { Lease } from '../core/lease.js';
import { runInTerm } from './context.js';
import type { TermContext } from './types.js';
import { settledWithin } from '../core/abort.js';

/**
 * One term under the manager: the context its hooks get, the work registered with it, and its
 * end. The term's signal is its own (not the lease's): it aborts on the lease's loss *and* on
 * resign, close, a hook error or the hooks returning — always first, before the drain, the
 * release of the lease and `onDemoted`.
 */
export class TermRun {
  readonly ctx: TermContext;
  readonly #ctl = new AbortController();
  readonly #work = new Set<Promise<unknown>>();
  readonly #lease: Lease;
  readonly #onLeaseLost = (): void => {
    const r: unknown = this.#lease.signal.reason;
    this.end('lost', r, r instanceof LeaseLostError ? r.reason : this.#lease.lostReason);
  };

  constructor(lease: Lease) {
    this.#lease = lease;
    const track = <T>(work: Promise<T> | (() => Promise<T>)): Promise<T> => this.track(work);
    this.ctx = Object.freeze({ signal: this.#ctl.signal, fence: lease.fence, term: lease, track });
    if (lease.signal.aborted) this.#onLeaseLost();
    else lease.signal.addEventListener('abort', this.#onLeaseLost, { once: true });
  }

  /** True once the term has ended (checking the lease's local deadline synchronously too). */
  get ended(): boolean {
    if (!this.#ctl.signal.aborted && this.#lease.lost) this.#onLeaseLost();
    return this.#ctl.signal.aborted;
  }

  /** Why it ended, once it has. */
  get reason(): TermEndedError | undefined {
    return this.#ctl.signal.aborted ? (this.#ctl.signal.reason as TermEndedError) : undefined;
  }

  /** Ends the term (the first call wins): the signal aborts now, with a TermEndedError. */
  end(reason: TermEndReason, cause?: unknown, lostReason?: LeaseLostError['reason']): void {
    if (this.#ctl.signal.aborted) return;
    this.#lease.signal.removeEventListener('abort', this.#onLeaseLost);
    this.#ctl.abort(new TermEndedError(reason, this.#lease.fence, { cause, ...(lostReason ? { lostReason } : {}) }));
  }

  /** Registers work (a function runs inside the term: `currentTerm()` is this term); the drain waits for it. Refused once the term has ended. */
  track<T>(work: Promise<T> | (() => Promise<T>)): Promise<T> {
    if (this.ended) return Promise.reject(new NotLeaderError('the term has ended; no new work is taken', { cause: this.reason }));
    let p: Promise<T>;
    try {
      p = typeof work === 'function' ? Promise.resolve(runInTerm(this.ctx, work)) : Promise.resolve(work);
    } catch (e) {
      p = Promise.reject(e);
    }
    const settled = p.then(
      () => undefined,
      () => undefined,
    );
    this.#work.add(settled);
    void settled.then(() => this.#work.delete(settled));
    return p;
  }

  /** Resolves once the term has ended. */
  whenEnded(): Promise<TermEndedError> {
    const s = this.#ctl.signal;
    return s.aborted ? Promise.resolve(s.reason as TermEndedError) : new Promise((r) => s.addEventListener('abort', () => r(s.reason as TermEndedError), { once: true }));
  }

  /**
   * Waits for every piece of registered work to settle, up to `timeoutMs` (work registered while
   * draining counts too). `pending` resolves when the last of it has settled, however late.
   */
  async drain(timeoutMs: number): Promise<{ drainedMs: number; timedOut: boolean; pending: Promise<void> }> {
    const t0 = performance.now();
    const all = async (): Promise<void> => {
      while (this.#work.size > 0) await Promise.all([...this.#work]);
    };
    const pending = all();
    const timedOut = !(await settledWithin(pending, timeoutMs));
    return { drainedMs: performance.now() - t0, timedOut, pending };
  }
}
