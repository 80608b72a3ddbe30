import { ClosedError, PermissionDeniedError, RequestTooLargeError, SessionExpiredError, StoreUnavailableError, TenureError, TlsError } from '../../core/errors.js';
import { probeTls, tlsProblem } from '../../core/tls.js';
import { etcd3 } from './peer.js';

/**
 * One error surface for etcd: what the etcd3 client throws becomes a tenure error with a stable
 * code (the original kept as `cause`), and only what may succeed on a retry is retried.
 */

/** Whether a failed etcd call is worth another try: transport trouble, never a refusal. */
export function retryableEtcdError(e: unknown): boolean {
  if (e instanceof TenureError) return e.retryable && e instanceof StoreUnavailableError;
  if (!(e instanceof Error)) return false;
  if (isRefusal(e) || tlsProblem(e)) return false;
  return etcd3.isRecoverableError(e) || e instanceof etcd3.GRPCDeadlineExceededError || e instanceof etcd3.GRPCUnavailableError || e.constructor === etcd3.GRPCGenericError;
}

/**
 * Refusals etcd sends as plain gRPC statuses: a wrong password arrives as
 * `3 INVALID_ARGUMENT: etcdserver: authentication failed, invalid user ID or password`.
 */
const DENIED = /etcdserver: (permission denied|authentication failed|user name (is )?empty|role is not granted|invalid auth token)/i;

function isRefusal(e: Error): boolean {
  return (
    DENIED.test(e.message) ||
    e instanceof etcd3.EtcdPermissionDeniedError ||
    e instanceof etcd3.EtcdAuthenticationFailedError ||
    e instanceof etcd3.EtcdInvalidAuthTokenError ||
    e instanceof etcd3.EtcdRoleNotGrantedError ||
    e instanceof etcd3.GRPCUnauthenticatedError ||
    e instanceof etcd3.GRPCResourceExhastedError ||
    e instanceof etcd3.GRPCInvalidArgumentError ||
    e instanceof etcd3.EtcdLeaseInvalidError ||
    /request is too large|too many operations/i.test(e.message)
  );
}

/** The tenure error for a failed etcd call (TenureErrors and abort reasons pass through). */
export function toTenureError(e: unknown, what: string, endpoint: string | undefined): unknown {
  if (e instanceof TenureError || !(e instanceof Error)) return e;
  if (e.name === 'AbortError') return e;
  const cause = { cause: e };
  // grpc-js reports a failed handshake as "14 UNAVAILABLE: No connection established. Last error: …".
  const tls = tlsProblem(e);
  if (tls) return new TlsError('etcd', endpoint, tls.problem, `${what}: ${tls.detail}`, cause);
  if (/request is too large|too many operations/i.test(e.message) || e instanceof etcd3.GRPCResourceExhastedError) return new RequestTooLargeError('etcd', `${what}: ${e.message}`, cause);
  if (
    e instanceof etcd3.EtcdPermissionDeniedError ||
    e instanceof etcd3.EtcdAuthenticationFailedError ||
    e instanceof etcd3.EtcdInvalidAuthTokenError ||
    e instanceof etcd3.EtcdRoleNotGrantedError ||
    e instanceof etcd3.GRPCUnauthenticatedError ||
    DENIED.test(e.message)
  ) {
    return new PermissionDeniedError('etcd', `${what}: ${e.message}`, cause);
  }
  if (e instanceof etcd3.EtcdLeaseInvalidError) return new SessionExpiredError(`${what}: ${e.message}`, cause);
  if (e instanceof etcd3.ClientClosedError) return new ClosedError(`${what}: etcd client`);
  if (retryableEtcdError(e)) return new StoreUnavailableError('etcd', endpoint, `${what}: ${e.message}`, cause);
  return new TenureError(`etcd: ${what}: ${e.message}`, 'TENURE_ERROR', cause);
}

/**
 * `err` as a TlsError when it is an outage on an `http://` endpoint that answers a TLS handshake:
 * plaintext to a TLS port, which grpc-js reports only as "Failed to connect". Else `err`.
 */
export async function plaintextToTls(err: unknown, endpoint: string | undefined): Promise<unknown> {
  if (!(err instanceof StoreUnavailableError) || !endpoint || !/Last error: Failed to connect/.test(String((err.cause as Error | undefined)?.message))) return err;
  for (const host of endpoint.split(',')) {
    const url = /^http:\/\/(\[[^\]]+\]|[^:/]+):(\d+)/.exec(host);
    if (url && (await probeTls(url[1]!.replace(/^\[|\]$/g, ''), Number(url[2]), {}, 500)).speaks) {
      return new TlsError('etcd', endpoint, 'plaintext', `${host} serves TLS: use https:// and the etcd3 credentials`, { cause: err });
    }
  }
  return err;
}
