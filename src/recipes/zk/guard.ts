import { ClosedError, ConfigError } from '../../core/errors.js';
import { ZkSession } from './session.js';

/** Throws a ConfigError unless `session` is a ZkSession. */
export function requireSession(session: unknown): ZkSession {
  if (!(session instanceof ZkSession)) throw new ConfigError('session', 'must be a ZkSession');
  return session;
}

/** A recipe's close switch: `signal` aborts on close, `throwIfClosed()` names the recipe. */
export class CloseGuard {
  readonly #ctl = new AbortController();
  constructor(readonly what: string) {}

  get closed(): boolean {
    return this.#ctl.signal.aborted;
  }

  get signal(): AbortSignal {
    return this.#ctl.signal;
  }

  /** Returns false when it was already closed. */
  close(): boolean {
    if (this.closed) return false;
    this.#ctl.abort(new ClosedError(this.what));
    return true;
  }

  throwIfClosed(): void {
    if (this.closed) throw new ClosedError(this.what);
  }

  /** The caller's signal joined with this guard's. */
  join(signal: AbortSignal | undefined): AbortSignal {
    return signal ? AbortSignal.any([signal, this.#ctl.signal]) : this.#ctl.signal;
  }
}
