import type { RedisClient } from './client.js';
import { raceSignal } from '../../core/abort.js';
import { PermissionDeniedError, RequestTooLargeError, StoreUnavailableError, TenureError } from '../../core/errors.js';

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

/**
 * Runs one Redis call with a bound: rejects with StoreUnavailableError after `ms` (the command may
 * still run later, when the connection comes back: `late` gets its result so the caller can undo
 * it), with `signal.reason` when `signal` aborts, and with a tenure error when it fails.
 */
export async function bounded<T>(redis: RedisClient, call: Promise<T>, ms: number, what: string, signal?: AbortSignal, late?: (value: T) => void): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  let settled = false;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new StoreUnavailableError('redis', redisEndpoint(redis), `${what}: no answer within ${ms} ms`)), ms);
  });
  try {
    const v = await raceSignal(Promise.race([call, timeout]), signal);
    settled = true;
    return v;
  } catch (e) {
    throw toTenureError(e, what, redisEndpoint(redis));
  } finally {
    clearTimeout(timer);
    if (!settled && late) call.then(late, () => undefined);
    else call.catch(() => undefined);
  }
}
