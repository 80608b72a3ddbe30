import type { Etcd3, IKeyValue, ITxnRequest, ITxnResponse } from 'etcd3';
import { sleep } from '../../core/abort.js';
import { SessionExpiredError } from '../../core/errors.js';
import type { Logger } from '../../core/options.js';

/** Runs a txn (retrying transport errors) until the signal aborts. */
export type Txn = (req: ITxnRequest, signal: AbortSignal) => Promise<ITxnResponse>;

/**
 * Watches one key (the predecessor) until it is deleted. The watch starts at "now", not at a past
 * revision: etcd serves a watch that starts in the past from a catch-up loop that runs every
 * 100 ms, which would add up to 100 ms to a hand-off. Once the watch is set up, one read checks
 * the key is still there **with the same create_revision** (a released participant re-queues
 * under the same key name), so a deletion just before cannot be missed.
 */
export async function waitDeleted(client: Etcd3, txn: Txn, pred: IKeyValue, signal: AbortSignal, logger: Logger): Promise<void> {
  const key = pred.key;
  signal.throwIfAborted();
  const w = client.watch().key(key).only('delete').watcher();
  let onAbort: (() => void) | undefined;
  let failed = false;
  try {
    await new Promise<void>((resolve, reject) => {
      onAbort = () => reject(signal.reason);
      signal.addEventListener('abort', onAbort, { once: true });
      w.on('delete', () => resolve());
      w.on('error', (e: unknown) => {
        logger.debug({ err: e, key: key.toString() }, 'predecessor watch failed; re-checking');
        failed = true;
        resolve();
      });
      w.once('connected', () => {
        txn({ compare: [], success: [{ request_range: { key, keys_only: true } }], failure: [] }, signal).then((r) => {
          if (r.responses[0]?.response_range.kvs[0]?.create_revision !== pred.create_revision) resolve();
        }, reject);
      });
    });
  } finally {
    if (onAbort) signal.removeEventListener('abort', onAbort);
    void w.cancel().catch(() => undefined);
  }
  if (failed) await sleep(100, signal);
}

/** A watch on a participant's own key. */
export interface OwnWatch {
  /** Aborts (reason SessionExpiredError) when the key is deleted. */
  readonly gone: AbortSignal;
  stop(): void;
}

/**
 * Watches the own key (created at `rev`): `gone` aborts when it is deleted (lease expired,
 * revoked, deleted by hand). Like the predecessor watch, it starts at "now" and then checks the
 * key, so a deletion before the watch was set up is seen too (etcd#19597).
 */
export function watchOwn(client: Etcd3, txn: Txn, keyBuf: Buffer, rev: bigint, signal: AbortSignal, what: string, logger: Logger): OwnWatch {
  const ctl = new AbortController();
  const stopped = new AbortController();
  const gone = (): void => ctl.abort(new SessionExpiredError(`${what}: own key ${keyBuf.toString()} was deleted (lease expired or revoked)`));
  const w = client.watch().key(keyBuf).only('delete').watcher();
  w.on('delete', gone);
  w.on('error', (e: unknown) => logger.warn({ err: e, key: keyBuf.toString() }, `${what}: own-key watch failed`));
  w.once('connected', () => {
    txn({ compare: [], success: [{ request_range: { key: keyBuf, keys_only: true } }], failure: [] }, AbortSignal.any([signal, stopped.signal])).then((r) => {
      if (!stopped.signal.aborted && r.responses[0]?.response_range.kvs[0]?.create_revision !== String(rev)) gone();
    }, () => undefined);
  });
  return {
    gone: ctl.signal,
    stop: () => {
      stopped.abort(); // ends the pending check, if any
      void w.cancel().catch(() => undefined);
    },
  };
}
