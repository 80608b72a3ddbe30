import type { Pool, PoolClient } from 'pg';
import { isAbortReason, raceTimeout } from '../../core/abort.js';
import { PermissionDeniedError, RequestTooLargeError, StoreUnavailableError, TenureError, TlsError } from '../../core/errors.js';
import { tlsProblem } from '../../core/tls.js';

/**
 * One error surface for Postgres: what `pg` throws (DatabaseError with a SQLSTATE, socket errors)
 * becomes a tenure error with a stable code, and the phases that talk to the server before a lock
 * wait begins — taking a pool connection above all — are bounded, so a server that is down or
 * blackholed answers within the bound instead of never (pg's connectionTimeoutMillis is 0).
 */

const endpoints = new WeakMap<Pool, string | undefined>();

/**
 * `host:port/database` of a pool, for error messages (never with credentials): where pg really
 * connects. The pool's own Client class reads its options (a `connectionString`, `PGHOST` /
 * `PGPORT`, pg's defaults) without connecting, so this names what a connection would dial, not
 * `localhost:5432` for a pool built from a URL. Worked out once per pool.
 */
export function pgEndpoint(pool: Pool): string | undefined {
  if (endpoints.has(pool)) return endpoints.get(pool);
  const p = pool as unknown as { options?: { host?: string; port?: number; database?: string }; Client?: new (o: unknown) => { host?: string; port?: number; database?: string } };
  let o: { host?: string; port?: number; database?: string } | undefined = p.options;
  try {
    // pg's Client parses its config in the constructor; its socket is made, never opened.
    if (p.Client && o) o = new p.Client(o);
  } catch {
    // A config pg itself would refuse: say what the options say.
  }
  const endpoint = o && `${o.host ?? 'localhost'}:${o.port ?? 5432}${o.database ? `/${o.database}` : ''}`;
  endpoints.set(pool, endpoint);
  return endpoint;
}

/** SQLSTATE classes that mean the server refuses for lack of privileges. */
const DENIED = new Set(['28P01', '28000', '42501']);
/** SQLSTATEs that mean "over a limit". */
const TOO_LARGE = new Set(['54000', '54001', '54011', '54023']);

/** The tenure error for a failed Postgres call (TenureErrors and `signal`'s abort reason pass through). */
export function toTenureError(e: unknown, what: string, endpoint: string | undefined, signal?: AbortSignal): unknown {
  if (isAbortReason(e, signal) || e instanceof TenureError || !(e instanceof Error) || e.name === 'AbortError') return e;
  const code = (e as { code?: unknown }).code;
  const cause = { cause: e };
  const tls = tlsProblem(e);
  if (tls) return new TlsError('postgres', endpoint, tls.problem, `${what}: ${tls.detail}`, cause);
  // pg_hba.conf has no rule for an unencrypted connection (hostssl lines only, or a reject).
  if (code === '28000' && /no encryption$/.test(e.message)) return new TlsError('postgres', endpoint, 'plaintext', `${what}: ${e.message} (${code})`, cause);
  if (typeof code === 'string' && DENIED.has(code)) return new PermissionDeniedError('postgres', `${what}: ${e.message} (${code})`, cause);
  if (typeof code === 'string' && TOO_LARGE.has(code)) return new RequestTooLargeError('postgres', `${what}: ${e.message} (${code})`, cause);
  const transport = typeof code === 'string' && (/^(08|57P)/.test(code) || /^E[A-Z]+$/.test(code));
  if (transport || /Connection terminated|connection timeout|ECONNREFUSED|Client has encountered a connection error/i.test(e.message)) {
    return new StoreUnavailableError('postgres', endpoint, `${what}: ${e.message}`, cause);
  }
  return new TenureError(`postgres: ${what}: ${e.message}`, 'TENURE_ERROR', cause);
}

/** Pools whose hand-outs are watched (see {@link watchHandOuts}). */
const watched = new WeakSet<Pool>();
/** Clients whose connection failed between the pool's hand-out and their taker's first look. */
const diedAtHandOut = new WeakMap<PoolClient, Error>();

/**
 * pg-pool drops its own 'error' listener from a client the moment it hands it out, in the same
 * synchronous step as the reply that completed the connection: a server that ends the connection
 * right after it (a restart's FATAL 57P01 in the same TCP read as the startup's ReadyForQuery) has
 * its error emitted before the taker's code runs, on a client with no listener, and the process
 * died of an unhandled 'error' event (seen in the ten-minute Postgres chaos runs). So every client
 * of a pool tenure takes from gets one listener of tenure's for its whole life, attached at the
 * hand-out (pg-pool's 'acquire' event comes first): it keeps an error that came before the taker
 * looked, for connectWithin to refuse that client, and never lets a late one crash the process.
 */
function watchHandOuts(pool: Pool): void {
  if (watched.has(pool)) return;
  watched.add(pool);
  const listening = new WeakSet<PoolClient>();
  pool.on('acquire', (client: PoolClient) => {
    diedAtHandOut.delete(client);
    if (listening.has(client)) return;
    listening.add(client);
    client.on('error', (e: Error) => {
      if (client.listenerCount('error') === 1) diedAtHandOut.set(client, e);
    });
  });
}

/**
 * Takes a connection from `pool` within `ms` (StoreUnavailableError after it), or rejects with
 * `signal.reason`. A connection that arrives after the caller gave up goes straight back.
 */
export async function connectWithin(pool: Pool, ms: number, what: string, signal?: AbortSignal): Promise<PoolClient> {
  watchHandOuts(pool);
  const pending = pool.connect();
  let got = false;
  try {
    const client = await raceTimeout(pending, ms, () => new StoreUnavailableError('postgres', pgEndpoint(pool), `${what}: no connection within ${ms} ms`), signal);
    const early = diedAtHandOut.get(client);
    if (early) {
      diedAtHandOut.delete(client);
      client.release(early);
      got = true;
      throw early;
    }
    got = true;
    return client;
  } catch (e) {
    throw toTenureError(e, what, pgEndpoint(pool), signal);
  } finally {
    if (!got) pending.then((c) => c.release(), () => undefined);
  }
}

/**
 * Settles like `call` within `ms` (StoreUnavailableError after it, `onTimeout` run first), errors as
 * tenure errors. (A `call` that fails after the timeout is no unhandled rejection: raceTimeout
 * handles it.)
 */
export function queryWithin<T>(call: Promise<T>, ms: number, what: string, endpoint: string | undefined, onTimeout?: () => void): Promise<T> {
  // A promise chain, not an async function: this runs for every statement of a lock cycle.
  return raceTimeout(
    call,
    ms,
    () => {
      onTimeout?.();
      return new StoreUnavailableError('postgres', endpoint, `${what}: no answer within ${ms} ms`);
    },
    undefined,
    (e: unknown) => Promise.reject(toTenureError(e, what, endpoint)),
  );
}
