import { CompareResult, CompareTarget, SortOrder, SortTarget, type ICompare, type IKeyValue, type IRequestOp, type ITxnResponse } from 'etcd3';
import { sleep } from '../../core/abort.js';
import { prefixEnd, retryingTxn } from './kv.js';
import { refuseNested } from './names.js';
import { LeaseController } from '../../core/lease.js';
import { LeaseLostError, SessionExpiredError, TenureError } from '../../core/errors.js';
import type { EtcdSession } from './session.js';

/**
 * The revision queue behind EtcdMutex and EtcdElection, written once (like etcd's `key.go`).
 *
 * Each participant puts one key, `<name>/<lease id hex>`, attached to its session's lease; the
 * queue order is the keys' `create_revision`. A waiter watches **only** its predecessor — the
 * key with the highest create_revision below its own — for deletion, so a release wakes exactly
 * one waiter (it also watches its own key, so losing it while queued rejects at once). On reaching the head, the participant refreshes its key with a put guarded by
 * `create_revision == own`: that put's revision is the fence, greater than every revision of
 * every earlier holder (their puts, proclaims and deletion included).
 */

/** What a participant holds at the head of the queue. */
export interface Slot {
  /** create_revision of the participant's key (its place in the queue). */
  readonly rev: bigint;
  /** @internal the session's claim on the key. */
  readonly token: object;
}

/** A watch on the participant's own key while it waits. */
interface OwnWatch {
  /** Aborts (reason SessionExpiredError) when the key is deleted. */
  readonly gone: AbortSignal;
  stop(): void;
}

/** What the enqueueing txn saw: the predecessor, if any. */
interface FirstLook {
  pred: IKeyValue | undefined;
}

/** Counters for tests and diagnostics. */
export interface QueueStats {
  /** Times a waiter was woken by its predecessor's deletion. */
  predecessorWakeups: number;
  /** Predecessor watches created. */
  predecessorWatches: number;
}

/** Total time an owner-checked delete may take before `release()` rejects. */
const REMOVE_MS = 5000;

export class RevisionQueue {
  readonly session: EtcdSession;
  /** `<name>/` */
  readonly prefix: Buffer;
  /** `<name>/<lease id hex>` */
  readonly key: string;
  readonly keyBuf: Buffer;
  readonly what: string;
  readonly stats: QueueStats = { predecessorWakeups: 0, predecessorWatches: 0 };

  constructor(session: EtcdSession, name: string, what: string) {
    this.session = session;
    this.prefix = Buffer.from(`${name}/`);
    this.key = `${name}/${session.leaseIdHex}`;
    this.keyBuf = Buffer.from(this.key);
    this.what = what;
  }

  /** A compare that holds while this participant's key is the one created at `rev`. */
  ownerCompare(rev: bigint): ICompare {
    return { key: this.keyBuf, target: CompareTarget.Create, result: CompareResult.Equal, create_revision: String(rev) };
  }

  /** Runs a txn, retrying transport errors until `signal` aborts. */
  txn(compare: ICompare[], success: IRequestOp[], failure: IRequestOp[], signal: AbortSignal): Promise<ITxnResponse> {
    return retryingTxn(this.session, { compare, success, failure }, signal, this.what);
  }

  /**
   * Puts the key if absent (keeping an existing one: a resumed lease keeps its place). A fresh
   * key is the newest, so the same txn reads its predecessor: the newest other key.
   */
  async enqueue(value: Buffer, signal: AbortSignal): Promise<{ rev: bigint; first?: FirstLook }> {
    const newest = { key: this.prefix, range_end: prefixEnd(this.prefix), sort_order: SortOrder.Descend, sort_target: SortTarget.Create, limit: 2, keys_only: true };
    for (;;) {
      const res = await this.txn(
        [{ key: this.keyBuf, target: CompareTarget.Create, result: CompareResult.Equal, create_revision: '0' }],
        [{ request_put: { key: this.keyBuf, value, lease: this.session.leaseId } }, { request_range: newest }],
        [{ request_range: { key: this.keyBuf } }],
        signal,
      );
      if (res.succeeded) {
        const rev = BigInt(res.header.revision);
        const pred = res.responses[1]?.response_range.kvs.find((kv) => BigInt(kv.create_revision) < rev);
        if (pred) refuseNested(this.prefix, pred.key);
        return { rev, first: { pred } };
      }
      const kv = res.responses[0]?.response_range.kvs[0];
      if (kv) return { rev: BigInt(kv.create_revision) };
    }
  }

  /**
   * Watches the own key (created at `rev`): `gone` aborts when it is deleted (lease expired,
   * revoked, deleted). Like the predecessor watch, it starts at "now" and then checks the key.
   */
  watchOwn(rev: bigint, signal: AbortSignal): OwnWatch {
    const ctl = new AbortController();
    const stopped = new AbortController();
    const gone = (): void => ctl.abort(new SessionExpiredError(`${this.what}: own key ${this.key} was deleted (lease expired or revoked)`));
    const w = this.session.client.watch().key(this.keyBuf).only('delete').watcher();
    w.on('delete', gone);
    w.on('error', (e: unknown) => this.session.logger.warn({ err: e, key: this.key }, `${this.what}: own-key watch failed`));
    w.once('connected', () => {
      this.txn([], [{ request_range: { key: this.keyBuf, keys_only: true } }], [], AbortSignal.any([signal, stopped.signal])).then((r) => {
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

  /**
   * Waits until the key created at `rev` heads the queue and claims it, in one txn per look:
   * "if my key is still mine and every key under the prefix was created at or after mine, put
   * my key (the fence); else tell me my key and my predecessor". Resolves with the fence.
   * Rejects with SessionExpiredError at once when the key disappears, and with `signal.reason`
   * when `signal` aborts.
   */
  async waitAndClaim(rev: bigint, value: Buffer, signal: AbortSignal, first?: FirstLook): Promise<bigint> {
    if (first?.pred) {
      await this.#waitDeleted(first.pred, signal);
      this.stats.predecessorWakeups++;
    }
    for (;;) {
      const res = await this.txn(
        [
          this.ownerCompare(rev),
          // Every key under the prefix (mine included) was created after rev − 1: none is ahead of me.
          { key: this.prefix, range_end: prefixEnd(this.prefix), target: CompareTarget.Create, result: CompareResult.Greater, create_revision: String(rev - 1n) },
        ],
        [{ request_put: { key: this.keyBuf, value, lease: this.session.leaseId } }],
        [
          { request_range: { key: this.keyBuf } },
          {
            request_range: {
              key: this.prefix,
              range_end: prefixEnd(this.prefix),
              max_create_revision: String(rev - 1n),
              sort_order: SortOrder.Descend,
              sort_target: SortTarget.Create,
              limit: 1,
              keys_only: true,
            },
          },
        ],
        signal,
      );
      if (res.succeeded) return BigInt(res.header.revision);
      const own: IKeyValue | undefined = res.responses[0]?.response_range.kvs[0];
      if (!own || BigInt(own.create_revision) !== rev) {
        throw new SessionExpiredError(`${this.what}: own key ${this.key} disappeared while queued (session expired?)`);
      }
      const pred = res.responses[1]?.response_range.kvs[0];
      if (!pred) continue; // it went between the compare and the read: look again
      refuseNested(this.prefix, pred.key);
      await this.#waitDeleted(pred, signal);
      this.stats.predecessorWakeups++;
    }
  }

  /**
   * Watches one key (the predecessor) until it is deleted. The watch starts at "now", not at a
   * past revision: etcd serves a watch that starts in the past from a catch-up loop that runs
   * every 100 ms, which would add up to 100 ms to a handoff. Once the watch is set up, one read
   * checks the key is still there **with the same create_revision** (a released participant
   * re-queues under the same key name), so a deletion just before cannot be missed.
   */
  async #waitDeleted(pred: IKeyValue, signal: AbortSignal): Promise<void> {
    const key = pred.key;
    signal.throwIfAborted();
    this.stats.predecessorWatches++;
    const w = this.session.client.watch().key(key).only('delete').watcher();
    let onAbort: (() => void) | undefined;
    let failed = false;
    try {
      await new Promise<void>((resolve, reject) => {
        onAbort = () => reject(signal.reason);
        signal.addEventListener('abort', onAbort, { once: true });
        w.on('delete', () => resolve());
        w.on('error', (e: unknown) => {
          this.session.logger.debug({ err: e, key: key.toString() }, `${this.what}: predecessor watch failed; re-checking`);
          failed = true;
          resolve();
        });
        w.once('connected', () => {
          this.txn([], [{ request_range: { key, keys_only: true } }], [], signal).then((r) => {
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

  /**
   * Refreshes the key with a put guarded by `create_revision == rev`; resolves with the put's
   * revision (the fence). Rejects with SessionExpiredError when the key is no longer ours.
   */
  async claim(rev: bigint, value: Buffer, signal: AbortSignal): Promise<bigint> {
    const res = await this.txn([this.ownerCompare(rev)], [{ request_put: { key: this.keyBuf, value, lease: this.session.leaseId } }], [], signal);
    if (!res.succeeded) throw new SessionExpiredError(`${this.what}: own key ${this.key} disappeared before it could be claimed`);
    return BigInt(res.header.revision);
  }

  /** Deletes the key if it is still the one created at `rev`. Resolves with whether it did. */
  async remove(rev: bigint, timeoutMs = REMOVE_MS): Promise<boolean> {
    const ctl = new AbortController();
    const timer = setTimeout(() => ctl.abort(new TenureError(`${this.what}: delete of ${this.key} timed out`)), timeoutMs);
    try {
      const res = await this.txn([this.ownerCompare(rev)], [{ request_delete_range: { key: this.keyBuf } }], [], ctl.signal).catch((e: unknown) => {
        throw ctl.signal.aborted ? ctl.signal.reason : e;
      });
      return res.succeeded;
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * Joins the queue, waits for the head and claims the fence. On any failure or abort the key is
   * removed (owner-checked) and the error is rethrown: SessionExpiredError when the session or
   * the key is gone, `signal.reason` when the caller aborted.
   */
  async acquire(value: Buffer, signal: AbortSignal, opts: { tryOnly?: boolean } = {}): Promise<{ slot: Slot; fence: bigint } | undefined> {
    signal.throwIfAborted();
    this.session.throwIfLost(this.what);
    const token = this.session.claimKey(this.key, this.what);
    let rev: bigint | undefined;
    let watch: OwnWatch | undefined;
    const scope = AbortSignal.any([signal, this.session.signal]);
    try {
      const queued = await this.enqueue(value, scope);
      rev = queued.rev;
      if (opts.tryOnly) {
        let taken = queued.first?.pred !== undefined;
        if (!queued.first) {
          const res = await this.txn([], [{ request_range: { key: this.prefix, range_end: prefixEnd(this.prefix), max_create_revision: String(rev - 1n), limit: 1, keys_only: true } }], [], scope);
          // (count ignores create_revision filters in etcd; the filtered kvs do not)
          const ahead = res.responses[0]?.response_range.kvs[0];
          if (ahead) refuseNested(this.prefix, ahead.key);
          taken = ahead !== undefined;
        }
        if (taken) {
          await this.#undo(rev, token);
          return undefined;
        }
      }
      let fence: bigint;
      if (queued.first && !queued.first.pred) {
        fence = await this.claim(rev, value, scope); // at the head from the start
      } else {
        // Queued behind someone: also watch the own key, so its loss rejects at once (etcd#19597).
        watch = this.watchOwn(rev, scope);
        fence = await this.waitAndClaim(rev, value, AbortSignal.any([scope, watch.gone]), queued.first);
        watch.stop();
      }
      return { slot: { rev, token }, fence };
    } catch (e) {
      watch?.stop();
      if (rev !== undefined) await this.#undo(rev, token);
      else this.session.freeKey(this.key, token);
      if (signal.aborted) throw signal.reason;
      if (this.session.signal.aborted) throw this.session.expiredError(this.what);
      if (watch?.gone.aborted) throw watch.gone.reason;
      throw e;
    }
  }

  async #undo(rev: bigint, token: object): Promise<void> {
    try {
      if (!this.session.signal.aborted) await this.remove(rev, 2000);
    } catch (e) {
      this.session.logger.warn({ err: e, key: this.key }, `${this.what}: could not remove own key; it goes with the session's lease`);
    } finally {
      this.session.freeKey(this.key, token);
    }
  }

  /**
   * The Lease for a claimed slot: aborts when the session is lost or its local deadline passes;
   * release deletes the key (owner-checked).
   */
  lease(name: string, slot: Slot, fence: bigint, onEnd: () => void): LeaseController {
    let ended = false;
    const end = (): void => {
      if (ended) return;
      ended = true;
      this.session.freeKey(this.key, slot.token);
      onEnd();
    };
    const ctl = new LeaseController({
      name,
      fence,
      parent: this.session.signal,
      deadline: () => this.session.deadline,
      clock: this.session.clock,
      release: async () => {
        try {
          if (!this.session.signal.aborted) await this.remove(slot.rev);
        } finally {
          end();
        }
      },
    });
    const onLost = (): void => {
      const reason: unknown = ctl.lease.signal.reason;
      // Lost, not released: the session is gone (or the key is); nothing left to delete.
      if (!(reason instanceof LeaseLostError && reason.reason === 'released')) end();
    };
    if (ctl.lease.signal.aborted) onLost();
    else ctl.lease.signal.addEventListener('abort', onLost, { once: true });
    return ctl;
  }
}
