import type { Etcd3, IKeyValue, ITxnRequest, ITxnResponse } from 'etcd3';
import { onAbort, sleep } from '../../core/abort.js';
import { SessionExpiredError } from '../../core/errors.js';
import type { Logger } from '../../core/options.js';
import type { LeaseEpoch } from './epoch.js';
import { watchKey, type KeyWatch } from './watch-stream.js';

/** Runs a txn (retrying transport errors) until the signal aborts. */
export type Txn = (req: ITxnRequest, signal: AbortSignal) => Promise<ITxnResponse>;

/**
 * Watches one key (the predecessor) until it is deleted. The watch starts at "now", not at a past
 * revision: etcd serves a watch that starts in the past from a catch-up loop that runs every
 * 100 ms, which would add up to 100 ms to a hand-off. Once the watch is set up, one read checks
 * the key is still there **with the same create_revision** (a released participant re-queues
 * under the same key name), so a deletion just before cannot be missed.
 *
 * "Now" has the same hazard in small: etcd reads its revision, then registers the watch from the
 * revision after; a commit in between leaves the watch behind, in that slow catch-up group (seen
 * in ~1 % of contended hand-offs, 40–80 ms each). No reply tells a waiter which group its watch
 * is in, but the check's revision says when it may be behind: equal to the revision the watch's
 * creation reported, nothing committed in between and the watch is live; above it, the waiter
 * starts a second watch (no second check: the read covered deletions up to its revision, the
 * first watch every one after its start), so a slow delivery needs both to have lost that race.
 */
export async function waitDeleted(client: Etcd3, txn: Txn, pred: IKeyValue, signal: AbortSignal, logger: Logger): Promise<void> {
  const key = pred.key;
  signal.throwIfAborted();
  const watches: KeyWatch[] = [];
  let settled = false;
  let onAbort: (() => void) | undefined;
  let failed = false;
  try {
    await new Promise<void>((resolve, reject) => {
      onAbort = () => reject(signal.reason);
      signal.addEventListener('abort', onAbort, { once: true });
      const watch = (check: boolean): void => {
        watches.push(
          watchKey(client, { key, deletesOnly: true }, {
            // Only this incarnation's deletion: a watch served by a member that has not applied every
            // revision yet starts behind, and may replay the deletion of an earlier key of that name.
            event: (_type, kv) => {
              if (BigInt(kv.mod_revision) > BigInt(pred.create_revision)) resolve();
            },
            failed: (e) => {
              logger.debug({ err: e, key: key.toString() }, 'predecessor watch failed; re-checking');
              failed = true;
              resolve();
            },
            created: check
              ? (created) => {
                  txn({ compare: [], success: [{ request_range: { key, keys_only: true } }], failure: [] }, signal).then((r) => {
                    if (r.responses[0]?.response_range.kvs[0]?.create_revision !== pred.create_revision) resolve();
                    else if (!settled && BigInt(r.header.revision) > created) watch(false);
                  }, reject);
                }
              : undefined,
          }),
        );
      };
      watch(true);
    });
  } finally {
    settled = true;
    if (onAbort) signal.removeEventListener('abort', onAbort);
    for (const w of watches) w.cancel();
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
  let w: KeyWatch | undefined;
  let again: NodeJS.Timeout | undefined;
  const start = (): void => {
    w = watchKey(client, { key: keyBuf, deletesOnly: true }, {
      // "Now" is the serving member's now: one that lags behind the member our txns went to replays
      // the deletion of this name's previous key (our own last release). Only a deletion after our
      // key was created counts.
      event: (_type, kv) => {
        if (BigInt(kv.mod_revision) > rev) gone();
      },
      // Ended by the server (compacted past its resume point, refused): watch and check again.
      failed: (e) => {
        logger.warn({ err: e, key: keyBuf.toString() }, `${what}: own-key watch failed; watching again`);
        if (stopped.signal.aborted || ctl.signal.aborted) return;
        again = setTimeout(start, 100);
        again.unref();
      },
      created: () => {
        txn({ compare: [], success: [{ request_range: { key: keyBuf, keys_only: true } }], failure: [] }, AbortSignal.any([signal, stopped.signal])).then((r) => {
          if (!stopped.signal.aborted && r.responses[0]?.response_range.kvs[0]?.create_revision !== String(rev)) gone();
        }, () => undefined);
      },
    });
  };
  start();
  return {
    gone: ctl.signal,
    stop: () => {
      stopped.abort(); // ends the pending check, if any
      clearTimeout(again);
      w?.cancel();
    },
  };
}

/** One epoch's watcher and the holder attached to it right now. */
type HolderEntry = { epoch: LeaseEpoch; w: KeyWatch; holder: { fence: bigint; lose: () => void } | undefined };

/**
 * The holder's watch on its own key, kept across the terms of one lease epoch: the key
 * (`<name>/<lease id hex>`) is the same every time, so one watcher serves them all and no
 * acquire/release cycle creates or cancels a watch (a watch per cycle cost an uncontended etcd
 * cycle ~20 %). A holder hears a deletion of its key from outside (lease revoked, key removed) as
 * soon as the next holder can be woken by the same deletion, not a keepalive later. A deletion
 * counts only past the attached holder's fence, so its own release (made after it detached) and
 * any deletion before its claim are not losses.
 */
export class HolderWatch {
  readonly #client: Etcd3;
  #current: HolderEntry | undefined;

  constructor(client: Etcd3) {
    this.#client = client;
  }

  /**
   * Attaches the holder of `keyBuf` (claimed at `fence` on `epoch`), creating the epoch's watcher
   * on first use: it starts at fence + 1, so it misses no later event and, when no write came in
   * between, is a synced watch; nothing on the acquire path waits for it. Returns the detach.
   */
  attach(epoch: LeaseEpoch, keyBuf: Buffer, fence: bigint, lose: () => void): () => void {
    let cur = this.#current;
    if (!cur || cur.epoch !== epoch) {
      if (cur) cur.w.cancel();
      const made: HolderEntry = { epoch, w: { cancel: () => undefined }, holder: undefined };
      made.w = watchKey(this.#client, { key: keyBuf, startRevision: fence + 1n, deletesOnly: true }, {
        event: (_type, kv) => {
          const h = made.holder;
          if (h && BigInt(kv.mod_revision) > h.fence) h.lose();
        },
        failed: () => undefined, // the session's keepalive and deadline still cover a lost lease
      });
      onAbort(epoch.signal, () => this.#drop(made)); // (one of thousands on the epoch's signal: see onAbort)
      this.#current = cur = made;
    }
    const holder = { fence, lose };
    const attached = cur;
    attached.holder = holder;
    return () => {
      if (attached.holder === holder) attached.holder = undefined;
    };
  }

  /** Ends the watch (the recipe is closing). Idempotent. */
  close(): void {
    this.#drop(this.#current);
  }

  #drop(cur: HolderEntry | undefined): void {
    if (!cur) return;
    cur.holder = undefined;
    if (this.#current === cur) this.#current = undefined;
    cur.w.cancel();
  }
}
