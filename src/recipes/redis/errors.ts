import type { RedisClient } from './client.js';
import { isAbortReason, raceTimeout } from '../../core/abort.js';
import { PermissionDeniedError, RequestTooLargeError, StoreUnavailableError, TenureError, TlsError } from '../../core/errors.js';
import { probeTls, tlsProblem, type TlsProbeOptions } from '../../core/tls.js';

/**
 * One error surface for Redis: what ioredis throws (connection errors, MaxRetriesPerRequestError,
 * ReplyErrors) becomes a tenure error with a stable code, and every call is bounded so a server
 * that is down or blackholed answers within the bound, not when ioredis gives up (tens of s).
 */

/** `host:port` of a client, for error messages (never with credentials). */
export function redisEndpoint(redis: RedisClient): string | undefined {
  if ((redis as { isCluster?: boolean }).isCluster) return 'cluster';
  const o = (redis as unknown as { options?: { host?: string; port?: number; path?: string } }).options;
  if (!o) return undefined;
  return o.path ?? `${o.host ?? '127.0.0.1'}:${o.port ?? 6379}`;
}

/** The tenure error for a failed Redis call (TenureErrors and abort reasons pass through). */
export function toTenureError(e: unknown, what: string, endpoint: string | undefined): unknown {
  if (e instanceof TenureError || !(e instanceof Error) || e.name === 'AbortError') return e;
  const cause = { cause: e };
  const msg = e.message;
  // Inside a script Redis 7.0 reports a missing ACL right as a plain ERR.
  if (/^(NOPERM|NOAUTH|WRONGPASS)|^ERR The user executing the script can't/.test(msg)) return new PermissionDeniedError('redis', `${what}: ${msg.split(' ')[0]}`, cause);
  if (/^(OOM|ERR .*(too large|max.*exceeded|Protocol error: .*big))/i.test(msg)) return new RequestTooLargeError('redis', `${what}: ${msg}`, cause);
  if (e.name === 'ReplyError') return new TenureError(`redis: ${what}: ${msg}`, 'TENURE_ERROR', cause);
  // Connection refused/reset, MaxRetriesPerRequestError, "Connection is closed", stream errors.
  return new StoreUnavailableError('redis', endpoint, `${what}: ${msg}`, cause);
}

/** The last connection error each client reported, until it is ready again. */
const lastErrors = new WeakMap<object, Error>();
const watched = new WeakSet<object>();

/**
 * Records the client's connection errors. ioredis reconnects for ever and fails a command only
 * with "max retries per request" or not at all: what went wrong — a certificate, a refused
 * login — is only in its `error` events. (A listener of ours means ioredis no longer prints
 * "Unhandled error event" for a client without one of yours.)
 */
function watchConnection(redis: RedisClient): void {
  if (watched.has(redis)) return;
  watched.add(redis);
  const record = (e: unknown): void => {
    if (e instanceof Error) lastErrors.set(redis, e);
  };
  const r = redis as unknown as { on(event: string, f: (e: unknown) => void): void };
  r.on('error', record);
  r.on('node error', record); // a Cluster's per-node connections
  r.on('ready', () => lastErrors.delete(redis));
}

/**
 * A StoreUnavailableError named for what the connection really met: a certificate problem
 * (TlsError), plaintext to a TLS port (a TLS handshake succeeds where ioredis was reset), a
 * refused login (PermissionDeniedError). Other errors are returned as they are.
 */
async function connectionFailure(err: unknown, redis: RedisClient, what: string, endpoint: string | undefined): Promise<unknown> {
  const last = lastErrors.get(redis);
  if (!(err instanceof StoreUnavailableError) || !last) return err;
  const tls = tlsProblem(last);
  if (tls) return new TlsError('redis', endpoint, tls.problem, `${what}: ${tls.detail}`, { cause: last });
  if (/^(NOAUTH|WRONGPASS)/.test(last.message)) return new PermissionDeniedError('redis', `${what}: ${last.message.split(' ')[0]}`, { cause: last });
  const o = (redis as unknown as { options?: { host?: string; port?: number; tls?: TlsProbeOptions } }).options;
  const code = (last as { code?: unknown }).code;
  // A Cluster has no one address to ask; its nodes' certificate errors are named above.
  if (!o || (redis as { isCluster?: boolean }).isCluster || (code !== 'ECONNRESET' && code !== 'EPIPE')) return err;
  // Reset during or right after a handshake: ask the server with the client's own TLS options.
  const probe = await probeTls(o.host ?? '127.0.0.1', o.port ?? 6379, o.tls ?? {}, 500);
  if (o.tls && probe.problem) return new TlsError('redis', endpoint, probe.problem.problem, `${what}: ${probe.problem.detail}`, { cause: last });
  if (!o.tls && probe.speaks) return new TlsError('redis', endpoint, 'plaintext', `${what}: the server speaks TLS and this client does not (give ioredis \`tls\`)`, { cause: last });
  return err;
}

/**
 * Runs one Redis call with a bound: rejects with StoreUnavailableError after `ms` (the command may
 * still run later, when the connection comes back: `late` gets its result so the caller can undo
 * it), with `signal.reason` when `signal` aborts, and with a tenure error when it fails.
 */
export function bounded<T>(redis: RedisClient, call: Promise<T>, ms: number, what: string, signal?: AbortSignal, late?: (value: T) => void): Promise<T> {
  watchConnection(redis);
  // Not an async function, and the errors mapped inside the race: this runs twice in every lock
  // cycle. raceTimeout handles the call's own rejection, so none can surface later unhandled.
  return raceTimeout(call, ms, () => new StoreUnavailableError('redis', redisEndpoint(redis), `${what}: no answer within ${ms} ms`), signal, async (e: unknown) => {
    if (late) call.then(late, () => undefined); // it may still be granted: the caller undoes it
    if (isAbortReason(e, signal)) throw e; // the caller's own reason, exactly (an Error reason is no store failure)
    const endpoint = redisEndpoint(redis);
    throw await connectionFailure(toTenureError(e, what, endpoint), redis, what, endpoint);
  });
}
