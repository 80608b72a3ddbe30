import { monotonicClock, type Clock } from './clock.js';
import { ConfigError } from './errors.js';
import { redactError } from './redact.js';
import type { OptionKeys } from './validate.js';

/**
 * The options every backend shares, named once: how a wait is bounded, how a recipe logs, which
 * clock it reads.
 */

/** Bounds a wait (acquire, campaign, connect): every call that can wait takes these. */
export interface WaitOptions {
  /** Aborts the wait; it rejects with `signal.reason` after undoing what it queued. */
  signal?: AbortSignal;
  /** Gives up after this many ms with an AcquireTimeoutError, undoing what it queued. @default no limit */
  timeoutMs?: number;
}

/** The keys of {@link WaitOptions} (for `requireOptions`). */
export const WAIT_KEYS: OptionKeys<WaitOptions> = { signal: true, timeoutMs: true };
/** The keys of `{ signal }`, the options of every `observe()` (for `requireOptions`). */
export const SIGNAL_KEYS: OptionKeys<{ signal?: AbortSignal }> = { signal: true };

type LogFn = {
  (obj: object, msg?: string, ...args: unknown[]): void;
  (msg: string, ...args: unknown[]): void;
};

/**
 * The logger tenure writes to: the subset of pino's API it uses, so a pino logger (or a child of
 * one), or any logger with the same shape, fits. Recipes log state edges at info, retries at debug.
 */
export interface Logger {
  /** Retries and other detail. */
  debug: LogFn;
  /** State edges (elected, lost, connected). */
  info: LogFn;
  /** Trouble tenure recovers from. */
  warn: LogFn;
  /** Trouble it does not. */
  error: LogFn;
  /** A logger that adds `bindings` to every line (one per recipe, with its name and id). */
  child(bindings: Record<string, unknown>): Logger;
}

const noop = (): void => undefined;
/** A logger that writes nothing; its children are itself (so recipes bind at no cost). */
const SILENT: Logger = Object.freeze({ debug: noop, info: noop, warn: noop, error: noop, child: () => SILENT });

/**
 * The default logger: writes nothing. tenure depends on no logging library; pass a pino logger
 * (or anything with the {@link Logger} shape) as `logger` to see its lines.
 */
export function silentLogger(): Logger {
  return SILENT;
}

/** Validates a `logger` option and returns a child with `bindings` (the silent logger when absent). */
export function optionalLogger(value: unknown, bindings: Record<string, unknown>): Logger {
  if (value === undefined) return silentLogger();
  const l = value as Partial<Logger> | null;
  if (l === null || typeof l !== 'object' || !(['debug', 'info', 'warn', 'error', 'child'] as const).every((m) => typeof l[m] === 'function')) {
    throw new ConfigError('logger', 'must be a pino-compatible logger (debug, info, warn, error, child)');
  }
  return redacting((l as Logger).child(bindings));
}

/**
 * `l` with every error a line carries (`err`, or any field holding one) cleaned of secrets first
 * (core/redact.ts): recipes log driver errors at debug before, or instead of, wrapping them.
 */
function redacting(l: Logger): Logger {
  const clean = (f: LogFn): LogFn =>
    ((first: unknown, ...rest: unknown[]) => {
      if (first instanceof Error) redactError(first);
      else if (first !== null && typeof first === 'object') for (const v of Object.values(first)) if (v instanceof Error) redactError(v);
      (f as (...a: unknown[]) => void).call(l, first, ...rest);
    }) as LogFn;
  return { debug: clean(l.debug), info: clean(l.info), warn: clean(l.warn), error: clean(l.error), child: (b) => redacting(l.child(b)) };
}

/** Validates a `clock` option (the monotonic clock when absent). */
export function optionalClock(value: unknown): Clock {
  if (value === undefined) return monotonicClock;
  if (value === null || typeof value !== 'object' || typeof (value as Clock).now !== 'function') {
    throw new ConfigError('clock', 'must be a Clock: an object with now() returning monotonic milliseconds');
  }
  const now = (value as Clock).now();
  if (typeof now !== 'number' || !Number.isFinite(now)) throw new ConfigError('clock', `now() must return a finite number, got ${String(now)}`);
  return value as Clock;
}
