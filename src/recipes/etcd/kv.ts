import type { ITxnRequest, ITxnResponse } from 'etcd3';
import { sleep } from '../../core/abort.js';
import { TenureError } from '../../core/errors.js';
import { callWithin, mapEtcdError } from './client.js';
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

/** Whether an error is worth retrying (a transport error, not a tenure decision or an abort). */
function transient(e: unknown, signal: AbortSignal): boolean {
  return !signal.aborted && !(e instanceof TenureError) && !(e instanceof Error && e.name === 'AbortError');
}

/** Runs a txn, retrying transport errors (with a short backoff) until `signal` aborts. */
export async function retryingTxn(session: EtcdSession, req: ITxnRequest, signal: AbortSignal, what: string): Promise<ITxnResponse> {
  for (let attempt = 0; ; attempt++) {
    signal.throwIfAborted();
    try {
      return await session.client.kv.txn(req, callWithin(ATTEMPT_MS));
    } catch (err) {
      const e = mapEtcdError(err);
      if (!transient(e, signal)) throw e;
      session.logger.debug({ err: e }, `${what}: etcd call failed; retrying`);
      await sleep(Math.min(500, 50 * 2 ** Math.min(attempt, 4)), signal);
    }
  }
}
