import type { Pool, PoolClient } from 'pg';
import { raceSignal } from '../../core/abort.js';
import { PermissionDeniedError, RequestTooLargeError, StoreUnavailableError, TenureError } from '../../core/errors.js';

/**
 * One error surface for Postgres: what `pg` throws (DatabaseError with a SQLSTATE, socket errors)
 * becomes a tenure error with a stable code, and the phases that talk to the server before a lock
 * wait begins — taking a pool connection above all — are bounded, so a server that is down or
 * blackholed answers within the bound instead of never (pg's connectionTimeoutMillis is 0).
 */

/** `host:port/database` of a pool, for error messages (never with credentials). */
export function pgEndpoint(pool: Pool): string | undefined {
  const o = (pool as unknown as { options?: { host?: string; port?: number; database?: string } }).options;
  if (!o) return undefined;
  return `${o.host ?? 'localhost'}:${o.port ?? 5432}${o.database ? `/${o.database}` : ''}`;
}

/** SQLSTATE classes that mean the server refuses for lack of privileges. */
const DENIED = new Set(['28P01', '28000', '42501']);
/** SQLSTATEs that mean "over a limit". */
const TOO_LARGE = new Set(['54000', '54001', '54011', '54023']);

/** The tenure error for a failed Postgres call (TenureErrors and abort reasons pass through). */
export function toTenureError(e: unknown, what: string, endpoint: string | undefined): unknown {
  if (e instanceof TenureError || !(e instanceof Error) || e.name === 'AbortError') return e;
  const code = (e as { code?: unknown }).code;
  const cause = { cause: e };
  if (typeof code === 'string' && DENIED.has(code)) return new PermissionDeniedError('postgres', `${what}: ${e.message} (${code})`, cause);
  if (typeof code === 'string' && TOO_LARGE.has(code)) return new RequestTooLargeError('postgres', `${what}: ${e.message} (${code})`, cause);
  const transport = typeof code === 'string' && (/^(08|57P)/.test(code) || /^E[A-Z]+$/.test(code));
  if (transport || /Connection terminated|connection timeout|ECONNREFUSED|Client has encountered a connection error/i.test(e.message)) {
    return new StoreUnavailableError('postgres', endpoint, `${what}: ${e.message}`, cause);
  }
  return new TenureError(`postgres: ${what}: ${e.message}`, 'TENURE_ERROR', cause);
}

/**
 * Takes a connection from `pool` within `ms` (StoreUnavailableError after it), or rejects with
 * `signal.reason`. A connection that arrives after the caller gave up goes straight back.
 */
export async function connectWithin(pool: Pool, ms: number, what: string, signal?: AbortSignal): Promise<PoolClient> {
  const pending = pool.connect();
  let timer: NodeJS.Timeout | undefined;
  let got = false;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new StoreUnavailableError('postgres', pgEndpoint(pool), `${what}: no connection within ${ms} ms`)), ms);
  });
  try {
    const client = await raceSignal(Promise.race([pending, timeout]), signal);
    got = true;
    return client;
  } catch (e) {
    throw toTenureError(e, what, pgEndpoint(pool));
  } finally {
    clearTimeout(timer);
    if (!got) pending.then((c) => c.release(), () => undefined);
  }
}

/** Settles like `call` within `ms` (StoreUnavailableError after it, `onTimeout` run first), errors as tenure errors. */
export async function queryWithin<T>(call: Promise<T>, ms: number, what: string, endpoint: string | undefined, onTimeout?: () => void): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      onTimeout?.();
      reject(new StoreUnavailableError('postgres', endpoint, `${what}: no answer within ${ms} ms`));
    }, ms);
  });
  try {
    return await Promise.race([call, timeout]);
  } catch (e) {
    throw toTenureError(e, what, endpoint);
  } finally {
    clearTimeout(timer);
    call.catch(() => undefined);
  }
}
