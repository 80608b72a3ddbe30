import type { Etcd3, IKeyValue, ITxnRequest, ITxnResponse } from 'etcd3';
import { onAbort, sleep } from '../../core/abort.js';
import { SessionExpiredError } from '../../core/errors.js';
import type { Logger } from '../../core/options.js';
import type { LeaseEpoch } from './epoch.js';
import { etcd3 } from './peer.js';
import { watchKey, type KeyWatch } from './watch-stream.js';

/** How long a predecessor's second watch lives (see waitDeleted): several of etcd's 100 ms catch-up passes. */
const HEDGE_MS = 1000;

/** Runs a txn (retrying transport errors) until the signal aborts. */
export type Txn = (req: ITxnRequest, signal: AbortSignal) => Promise<ITxnResponse>;

/** What {@link readKey} saw: the key's create_revision (undefined when absent), and the revision read at. */
export interface KeyRead {
  createRevision: string | undefined;
  revision: bigint;
}

/** etcd refuses a txn of more than `--max-txn-ops` operations (default 128). */
const READS_PER_TXN = 64;

interface PendingRead {
  key: Buffer;
  signal: AbortSignal;
  txn: Txn;
  resolve: (r: KeyRead) => void;
  reject: (e: unknown) => void;
}

const pendingReads = new WeakMap<Etcd3, PendingRead[]>();

/**
 * Reads one key (keys only) for the check a new watch makes once it is created: that the key it
 * watches is still the one it means. The reads a client's callers ask for in one turn of the event
 * loop go out as one txn of range operations (up to {@link READS_PER_TXN} each): a burst of joins
 * (1,000 elections on 20 clients, each waiter with a watch to check) made one unary call per
 * check, and those calls were a fifth of the burst's client CPU. A read resolves with the
 * revision of the txn it went in, which is no earlier than its own call: every check compares
 * against a revision it was asked after. A caller's abort rejects its own read at once; the txn
 * runs (through the first caller's `txn`, retrying transport errors) until every caller in it has
 * aborted. All callers of one client read with that client's credentials.
 */
export function readKey(client: Etcd3, txn: Txn, key: Buffer, signal: AbortSignal): Promise<KeyRead> {
  if (signal.aborted) return Promise.reject(signal.reason);
  let queue = pendingReads.get(client);
  if (!queue) {
    pendingReads.set(client, (queue = []));
    setImmediate(() => flushReads(client));
  }
  const reads = queue;
  return new Promise((resolve, reject) => reads.push({ key, signal, txn, resolve, reject }));
}

function flushReads(client: Etcd3): void {
  const queue = pendingReads.get(client) ?? [];
  pendingReads.delete(client);
  for (let i = 0; i < queue.length; i += READS_PER_TXN) sendReads(queue.slice(i, i + READS_PER_TXN));
}

function sendReads(batch: PendingRead[]): void {
  const live = batch.filter((r) => {
    if (r.signal.aborted) r.reject(r.signal.reason);
    return !r.signal.aborted;
  });
  if (live.length === 0) return;
  const all = new AbortController();
  let waiting = live.length;
  const unsubscribe = live.map((r) =>
    onAbort(r.signal, () => {
      r.reject(r.signal.reason);
      if (--waiting === 0) all.abort(r.signal.reason);
    }),
  );
  live[0]!.txn({ compare: [], success: live.map((r) => ({ request_range: { key: r.key, keys_only: true } })), failure: [] }, all.signal).then(
    (res) => {
      const revision = BigInt(res.header.revision);
      live.forEach((r, i) => r.resolve({ createRevision: res.responses[i]?.response_range.kvs[0]?.create_revision, revision }));
    },
    (e: unknown) => {
      for (const r of live) r.reject(e);
    },
  ).finally(() => {
    for (const u of unsubscribe) u();
  });
}

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
 * The second watch is a hedge for that first moment only: by `HEDGE_MS` the catch-up loop has
 * synced the first, so the second is cancelled then (a burst of joins, commits landing between
 * nearly every creation and its check, held ~2.4 watches per waiter instead of 2).
 */
export async function waitDeleted(client: Etcd3, txn: Txn, pred: IKeyValue, signal: AbortSignal, logger: Logger): Promise<void> {
  const key = pred.key;
  signal.throwIfAborted();
  const watches: KeyWatch[] = [];
  let hedge: NodeJS.Timeout | undefined;
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
                  readKey(client, txn, key, signal).then((r) => {
                    if (r.createRevision !== pred.create_revision) resolve();
                    else if (!settled && r.revision > created) {
                      watch(false);
                      const second = watches[watches.length - 1]!;
                      hedge = setTimeout(() => second.cancel(), HEDGE_MS);
                      hedge.unref();
                    }
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
    clearTimeout(hedge);
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
        if (stopped.signal.aborted || ctl.signal.aborted || e instanceof etcd3.ClientClosedError) return;
        logger.warn({ err: e, key: keyBuf.toString() }, `${what}: own-key watch failed; watching again`);
        again = setTimeout(start, 100);
        again.unref();
      },
      created: () => {
        readKey(client, txn, keyBuf, AbortSignal.any([signal, stopped.signal])).then((r) => {
          if (!stopped.signal.aborted && r.createRevision !== String(rev)) gone();
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

/** Who is attached to an epoch's own-key watch right now: a waiter or a holder of that key. */
interface Attached {
  /** create_revision of the key's incarnation this participant queued with. */
  rev: bigint;
  /** Deletions after this revision are losses (a waiter: its key's creation; a holder: its fence). */
  after: bigint;
  lose: () => void;
}

/** One epoch's own-key watch. */
interface OwnEntry {
  epoch: LeaseEpoch;
  keyBuf: Buffer;
  w: KeyWatch;
  attached: Attached | undefined;
  /** mod_revision of the latest deletion the watch delivered. */
  lastDeleted: bigint;
}

/**
 * A participant's watch on its own key, kept across every wait and every term of one lease epoch:
 * the key (`<name>/<lease id hex>`) is the same every time, so one watch serves them all and no
 * acquire/release cycle creates, checks or cancels one (a watch per cycle cost an uncontended etcd
 * cycle ~20 %; a queued waiter's own watch and its check read were a third of what 1,000
 * participants queueing at once sent).
 * - A waiter hears its key deleted while queued (lease expired or revoked, key removed) and
 *   rejects at once instead of a keepalive later (etcd#19597).
 * - A holder hears a deletion of its key from outside as soon as the next holder can be woken by
 *   the same deletion.
 * A deletion counts only past the attached participant's revision (a waiter: its key's creation;
 * a holder: its fence), so its own releases (made after it detached) and the deletions of earlier
 * incarnations of the key are not losses.
 *
 * The watch starts at the first attached revision + 1, not "now": it misses nothing after the
 * key's creation, so no read is needed to cover the time before it was set up; when nothing was
 * written in between, etcd serves it as a live (synced) watch at once, else its 100 ms catch-up
 * loop brings it up to date first — a delay only on the first wait of an epoch, and never on a
 * hand-off, which the predecessor's watch (waitDeleted) carries.
 */
export class OwnKeyWatch {
  readonly #client: Etcd3;
  readonly #txn: Txn;
  readonly #logger: Logger;
  #current: OwnEntry | undefined;

  constructor(client: Etcd3, txn: Txn, logger: Logger) {
    this.#client = client;
    this.#txn = txn;
    this.#logger = logger;
  }

  /**
   * Attaches the participant whose key `keyBuf` was created at `rev` on `epoch`: `lose` runs once
   * when the key is deleted at a revision above `after`, also when that deletion came before this
   * call. Returns the detach.
   */
  attach(epoch: LeaseEpoch, keyBuf: Buffer, rev: bigint, after: bigint, lose: () => void): () => void {
    let cur = this.#current;
    if (!cur || cur.epoch !== epoch || !cur.keyBuf.equals(keyBuf)) {
      if (cur) this.#drop(cur);
      const made: OwnEntry = { epoch, keyBuf, w: NO_WATCH, attached: undefined, lastDeleted: 0n };
      this.#watch(made, after + 1n);
      onAbort(epoch.signal, () => this.#drop(made)); // (one of thousands on the epoch's signal: see onAbort)
      this.#current = cur = made;
    }
    let done = false;
    const attached: Attached = {
      rev,
      after,
      lose: () => {
        if (done) return;
        done = true;
        lose();
      },
    };
    const entry = cur;
    entry.attached = attached;
    if (entry.lastDeleted > after) attached.lose();
    return () => {
      if (entry.attached === attached) entry.attached = undefined;
    };
  }

  /** Ends the watch (the recipe is closing). Idempotent. */
  close(): void {
    if (this.#current) this.#drop(this.#current);
  }

  #watch(entry: OwnEntry, startRevision: bigint | undefined): void {
    entry.w = watchKey(this.#client, { key: entry.keyBuf, startRevision, deletesOnly: true }, {
      event: (_type, kv) => {
        const rev = BigInt(kv.mod_revision);
        if (rev > entry.lastDeleted) entry.lastDeleted = rev;
        const a = entry.attached;
        if (a && rev > a.after) a.lose();
      },
      // Ended by the server (compacted past where it would resume, refused): watch again from now
      // and read the key once, so a deletion in between is not missed.
      failed: (e) => {
        if (this.#current !== entry || e instanceof etcd3.ClientClosedError) return;
        this.#logger.warn({ err: e, key: entry.keyBuf.toString() }, 'own-key watch ended by the server; watching again');
        const again = setTimeout(() => {
          if (this.#current === entry) this.#watch(entry, undefined);
        }, 100);
        again.unref();
      },
      created: startRevision !== undefined ? undefined : () => void this.#check(entry),
    });
  }

  async #check(entry: OwnEntry): Promise<void> {
    const a = entry.attached;
    if (!a) return;
    try {
      const r = await readKey(this.#client, this.#txn, entry.keyBuf, entry.epoch.signal);
      if (entry.attached === a && r.createRevision !== String(a.rev)) a.lose();
    } catch {
      // the epoch ended: its loss is the session's to report
    }
  }

  #drop(entry: OwnEntry): void {
    entry.attached = undefined;
    if (this.#current === entry) this.#current = undefined;
    entry.w.cancel();
  }
}

const NO_WATCH: KeyWatch = { cancel: () => undefined };
