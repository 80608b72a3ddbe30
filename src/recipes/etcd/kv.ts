import type { ITxnRequest, ITxnResponse } from 'etcd3';
import { retryUntil } from '../../core/backoff.js';
import { callWithin } from './client.js';
import { retryableEtcdError, toTenureError } from './errors.js';
import type { EtcdSession } from './session.js';

/**
 * Per-attempt deadline of queue calls. A proposal in flight when etcd's raft leader dies is
 * dropped and the call would hang until etcd's own ~5 s request timeout; a short deadline and a
 * retry (every queue write is guarded, so retrying is safe) rides through a raft election.
 */
export const ATTEMPT_MS = 1500;

/** The first key after every key starting with `prefix`. */
export function prefixEnd(prefix: Buffer): Buffer {
  const end = Buffer.from(prefix);
  for (let i = end.length - 1; i >= 0; i--) {
    if (end[i]! < 0xff) {
      end[i]!++;
      return end.subarray(0, i + 1);
    }
  }
  return Buffer.from([0]);
}

/**
 * Runs a txn, retrying transport errors through the backoff policy until `signal` aborts or the
 * failures have lasted the session's `callTimeoutMs` (then StoreUnavailableError: etcd is down
 * or unreachable, not blinking); a refusal (permission denied, request too large) is not retried
 * and rejects as a tenure error at once.
 */
export async function retryingTxn(session: EtcdSession, req: ITxnRequest, signal: AbortSignal, what: string): Promise<ITxnResponse> {
  try {
    return await retryUntil(() => session.client.kv.txn(req, callWithin(ATTEMPT_MS)), {
      signal,
      retryable: retryableEtcdError,
      giveUpAfterMs: session.callTimeoutMs,
      onRetry: (e) => session.logger.debug({ err: e }, `${what}: etcd call failed; retrying`),
    });
  } catch (e) {
    throw toTenureError(e, what, session.endpoint);
  }
}
