import type { Etcd3, IKeyValue, ITxnRequest, ITxnResponse, IWatchResponse, Watcher } from 'etcd3';
import { onAbort, sleep } from '../../core/abort.js';
import { SessionExpiredError } from '../../core/errors.js';
import type { Logger } from '../../core/options.js';
import type { LeaseEpoch } from './epoch.js';

/** How long a finished watcher stays attached at most, waiting for the next one (see retire). */
const LINGER_MS = 1000;
const lingering = new WeakMap<Etcd3, { w: Watcher; timer: NodeJS.Timeout }>();

/**
 * Cancels a watcher that is no longer needed — one step late. etcd3 tears a client's watch
 * stream down when its last watcher is cancelled and opens a new one for the next watcher, and
 * every acquire/release cycle of a queue ends its watchers and starts new ones: without a
 * lingering watcher that was a new gRPC stream per cycle, half of an uncontended etcd cycle
 * (measured: 16 → 9 ms p50 on a loaded 2-core machine). So the finished watcher stays attached
 * (its listeners gone) until the next one finishes or `LINGER_MS` passes: at most one extra
 * server watch per client, on a key the recipe was already allowed to watch.
 */
export function retire(client: Etcd3, w: Watcher): void {
  w.removeAllListeners();
  w.on('error', () => undefined); // a stream error on a retired watcher is nobody's concern
  const before = lingering.get(client);
  if (before) {
    clearTimeout(before.timer);
    void before.w.cancel().catch(() => undefined);
  }
  const timer = setTimeout(() => {
    if (lingering.get(client)?.w === w) lingering.delete(client);
    void w.cancel().catch(() => undefined);
  }, LINGER_MS);
  timer.unref();
  lingering.set(client, { w, timer });
}

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
  const watchers: Watcher[] = [];
  let settled = false;
  let onAbort: (() => void) | undefined;
  let failed = false;
  try {
    await new Promise<void>((resolve, reject) => {
      onAbort = () => reject(signal.reason);
      signal.addEventListener('abort', onAbort, { once: true });
      const watch = (check: boolean): void => {
        const w = client.watch().key(key).only('delete').watcher();
        watchers.push(w);
        // Only this incarnation's deletion: a watch served by a member that has not applied every
        // revision yet starts behind, and may replay the deletion of an earlier key of that name.
        w.on('delete', (kv: IKeyValue) => {
          if (BigInt(kv.mod_revision) > BigInt(pred.create_revision)) resolve();
        });
        w.on('error', (e: unknown) => {
          logger.debug({ err: e, key: key.toString() }, 'predecessor watch failed; re-checking');
          failed = true;
          resolve();
        });
        if (!check) return;
        w.once('connected', (created: IWatchResponse) => {
          txn({ compare: [], success: [{ request_range: { key, keys_only: true } }], failure: [] }, signal).then((r) => {
            if (r.responses[0]?.response_range.kvs[0]?.create_revision !== pred.create_revision) resolve();
            else if (!settled && BigInt(r.header.revision) > BigInt(created.header.revision)) watch(false);
          }, reject);
        });
      };
      watch(true);
    });
  } finally {
    settled = true;
    if (onAbort) signal.removeEventListener('abort', onAbort);
    const last = watchers.pop()!;
    for (const w of watchers) {
      w.removeAllListeners();
      w.on('error', () => undefined);
      void w.cancel().catch(() => undefined);
    }
    retire(client, last);
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
  // "Now" is the serving member's now: one that lags behind the member our txns went to replays
  // the deletion of this name's previous key (our own last release). Only a deletion after our
  // key was created counts.
  w.on('delete', (kv: IKeyValue) => {
    if (BigInt(kv.mod_revision) > rev) gone();
  });
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
      retire(client, w);
    },
  };
}

/** One epoch's watcher and the holder attached to it right now. */
type HolderEntry = { epoch: LeaseEpoch; w: Watcher; holder: { fence: bigint; lose: () => void } | undefined };

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
      if (cur) retire(this.#client, cur.w);
      const w = this.#client.watch().key(keyBuf).startRevision(String(fence + 1n)).only('delete').watcher();
      const made: HolderEntry = { epoch, w, holder: undefined };
      w.on('delete', (kv: IKeyValue) => {
        const h = made.holder;
        if (h && BigInt(kv.mod_revision) > h.fence) h.lose();
      });
      w.on('error', () => undefined); // the session's keepalive and deadline still cover a lost lease
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
    retire(this.#client, cur.w);
  }
}
