import type { ICompare, IKeyValue, IRequestOp, ITxnResponse } from 'etcd3';
import { etcd3 } from './peer.js';
import { LeaseController } from '../../core/lease.js';
import { PermissionDeniedError, SessionExpiredError, TenureError } from '../../core/errors.js';
import { prefixEnd, retryingTxn } from './kv.js';
import { refuseNested, tailKey } from './names.js';
import type { LeaseEpoch } from './epoch.js';
import type { EtcdSession } from './session.js';
import { OwnKeyWatch, waitDeleted, type Txn } from './watch.js';
import { inWindow } from '../../core/window.js';
import { joinSignals } from '../../core/abort.js';

/**
 * The revision queue behind EtcdMutex and EtcdElection, written once (like etcd's `key.go`).
 *
 * Each participant puts one key, `<name>/<lease id hex>`, attached to its session's lease; the
 * queue order is the keys' `create_revision`. A waiter watches **only** its predecessor — the
 * key with the highest create_revision below its own — for deletion, so a release wakes exactly
 * one waiter (it also watches its own key, so losing it while queued rejects at once). On
 * reaching the head, the participant refreshes its key with a put guarded by
 * `create_revision == own`: that put's revision is the fence, greater than every revision of
 * every earlier holder (their puts, proclaims and deletion included).
 *
 * With `fenceAtEnqueue`, a participant whose enqueueing txn itself shows no predecessor takes
 * that txn's revision as the fence and skips the claim (an uncontended cycle is 2 txns, not 3):
 * the put is the newest write under the prefix, so its revision already exceeds every revision
 * of every earlier holder. Elections keep the claim: observers tell a leader from a head about to
 * claim by the claim's version (see observe.ts), and a version-1 head is "nobody leads yet".
 *
 * Finding the predecessor must not read the whole prefix: etcd 3.4 answers a range with a sort or
 * a create/mod-revision filter by reading every key in it and truncating afterwards (its `limit`
 * is ignored), ~1.2 ms per 1,000 keys inside the apply loop, which also holds back every
 * keepalive (LeaseRenew waits for the applied index): at 10,000 participants the joins took 78 s
 * and a third of the leases were lost (issue 22). So the enqueueing txn also reads and moves a
 * **tail hint**, `<name>#tail` (names.ts): the newest tenure participant's key name, put with its
 * key (so the hint's mod_revision is that key's create_revision) on its lease (so it goes with
 * it), and deleted by that participant's owner-checked delete while it still names it. A join
 * then reads one key. The hint only says whom to watch; the claim's prefix-wide compare still
 * decides who heads the queue, so a stale hint or a Go participant the hint skipped costs a
 * look, never exclusion. With no hint (the first join, or the newest participant left) the txn
 * reads the newest key by create_revision, as before. A role granted `<name>/` alone may not
 * touch the hint: its first join is refused, and that queue's joins go on without the hint
 * (reading the newest key, as a Go participant does), said once at warn.
 */

/** A claim whose reply was read past its lease's local deadline (see `acquire`). */
class LateClaimError extends SessionExpiredError {
  constructor(cause: TenureError) {
    super(cause.message, { cause });
  }
}

/** The session lease was revoked before a keepalive could tell the session. */
const revoked = (e: unknown): boolean => e instanceof SessionExpiredError && e.cause instanceof etcd3.EtcdLeaseInvalidError;

/** One place in the queue: the key of one session lease, claimed for one acquisition. */
export interface Slot {
  readonly epoch: LeaseEpoch;
  /** `<name>/<lease id hex>` */
  readonly key: string;
  readonly keyBuf: Buffer;
  /** create_revision of the key (its place in the queue). */
  readonly rev: bigint;
  /** The session's claim on the key. */
  readonly token: object;
  /** Its join could touch the tail hint: its delete also removes the hint while that names the key. */
  readonly hinted: boolean;
}

/** What the enqueueing txn saw, with no tail hint to read: the newest other key, if any. */
interface FirstLook {
  pred: IKeyValue | undefined;
}

/** What the enqueueing txn found out: `first` when it read the prefix, `hint` when it read the tail. */
interface Enqueued {
  rev: bigint;
  /** The join's txn could touch the tail hint (see Slot). */
  hinted: boolean;
  first?: FirstLook;
  /** The tail hint's key and create_revision: an earlier key to watch, maybe gone since. */
  hint?: IKeyValue;
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
  readonly name: string;
  /** `<name>/` */
  readonly prefix: Buffer;
  /** `<name>#tail` */
  readonly #tail: Buffer;
  readonly what: string;
  readonly stats: QueueStats = { predecessorWakeups: 0, predecessorWatches: 0 };
  readonly #txn: Txn;
  readonly #ownWatch: OwnKeyWatch;
  readonly #fenceAtEnqueue: boolean;
  /** False once a join touching the tail hint was refused: the role covers `<name>/` alone. */
  #hinting = true;

  constructor(session: EtcdSession, name: string, what: string, opts: { fenceAtEnqueue?: boolean } = {}) {
    this.session = session;
    this.#fenceAtEnqueue = opts.fenceAtEnqueue ?? false;
    this.name = name;
    this.prefix = Buffer.from(`${name}/`);
    this.#tail = tailKey(name);
    this.what = what;
    this.#txn = (req, signal) => retryingTxn(this.session, req, signal, this.what);
    this.#ownWatch = new OwnKeyWatch(session.client, this.#txn, session.logger);
  }

  /** The key this session's current lease queues under. */
  get key(): string {
    return `${this.name}/${this.session.leaseIdHex}`;
  }

  /** A compare that holds while the key is the one created at `rev`. */
  ownerCompare(keyBuf: Buffer, rev: bigint): ICompare {
    return { key: keyBuf, target: etcd3.CompareTarget.Create, result: etcd3.CompareResult.Equal, create_revision: String(rev) };
  }

  /** Runs a txn, retrying transport errors until `signal` aborts. */
  txn(compare: ICompare[], success: IRequestOp[], failure: IRequestOp[], signal: AbortSignal): Promise<ITxnResponse> {
    return this.#txn({ compare, success, failure }, signal);
  }

  /**
   * Puts the key if absent (keeping an existing one: a resumed lease keeps its place) and makes
   * it the tail hint. A fresh key is the newest, so the same txn reads, before the puts, the key
   * to queue behind: the one the tail hint names, or with no hint the newest key under the prefix.
   */
  async #enqueue(keyBuf: Buffer, leaseId: string, value: Buffer, signal: AbortSignal): Promise<Enqueued> {
    const newest = { key: this.prefix, range_end: prefixEnd(this.prefix), sort_order: etcd3.SortOrder.Descend, sort_target: etcd3.SortTarget.Create, limit: 1, keys_only: true };
    const look: IRequestOp = {
      request_txn: {
        compare: [{ key: this.#tail, target: etcd3.CompareTarget.Version, result: etcd3.CompareResult.Greater, version: '0' }],
        success: [{ request_range: { key: this.#tail } }],
        failure: [{ request_range: newest }],
      },
    };
    const put: IRequestOp = { request_put: { key: keyBuf, value, lease: leaseId } };
    const putHint: IRequestOp = { request_put: { key: this.#tail, value: keyBuf, lease: leaseId } };
    for (;;) {
      const hinted = this.#hinting;
      let res: ITxnResponse;
      try {
        // (within the client's window of joins in flight: see core/window.ts)
        res = await inWindow(this.session.client, signal, () =>
          this.txn(
            [{ key: keyBuf, target: etcd3.CompareTarget.Create, result: etcd3.CompareResult.Equal, create_revision: '0' }],
            hinted ? [look, put, putHint] : [{ request_range: newest }, put],
            [{ request_range: { key: keyBuf } }],
            signal,
          ),
        );
      } catch (e) {
        if (!hinted || !(e instanceof PermissionDeniedError) || !/permission denied/i.test(e.message)) throw e;
        // The role may write `<name>/` but not `<name>#tail` (or it may write neither: the next
        // txn, without the hint, says so).
        this.#hinting = false;
        this.session.logger.warn({ err: e }, `${this.what}: the role may not write ${this.#tail.toString()}; joins read the queue's newest key instead (grant the prefix the names live under to keep the hint)`);
        continue;
      }
      if (res.succeeded) {
        const rev = BigInt(res.header.revision);
        const seen = hinted ? res.responses[0]?.response_txn : undefined;
        if (!seen?.succeeded) {
          // No hint read (none yet, or the role may not touch it): the txn read the newest key.
          const kv = (hinted ? seen?.responses[0] : res.responses[0])?.response_range.kvs[0];
          if (kv) refuseNested(this.prefix, kv.key);
          return { rev, hinted, first: { pred: kv } };
        }
        const kv = seen.responses[0]?.response_range.kvs[0];
        // The hint names its key and, by its mod_revision, that key's create_revision. One naming
        // this very key is an earlier incarnation's, left by a delete that failed; one naming a
        // key outside the queue was not written by a participant, and waiting on it could be for ever.
        if (!kv || kv.value.equals(keyBuf) || !kv.value.subarray(0, this.prefix.length).equals(this.prefix)) return { rev, hinted };
        refuseNested(this.prefix, kv.value);
        return { rev, hinted, hint: { ...kv, key: kv.value, create_revision: kv.mod_revision } };
      }
      const kv = res.responses[0]?.response_range.kvs[0];
      // (an existing key: a resumed lease's, whose join may have moved the hint)
      if (kv) return { rev: BigInt(kv.create_revision), hinted };
    }
  }

  /**
   * Waits until the slot heads the queue and claims it, in one txn per look: "if my key is still
   * mine and every key under the prefix was created at or after mine, put my key (the fence);
   * else tell me my key and my predecessor". Resolves with the fence. Rejects with
   * SessionExpiredError at once when the key disappears, and with `signal.reason` when `signal`
   * aborts. `pred`, when known, is waited for before the first look.
   */
  async #waitAndClaim(slot: Slot, value: Buffer, signal: AbortSignal, pred?: IKeyValue): Promise<bigint> {
    const { keyBuf, rev } = slot;
    if (pred) await this.#waitFor(pred, signal);
    for (;;) {
      const res = await this.txn(
        [
          this.ownerCompare(keyBuf, rev),
          // Every key under the prefix (mine included) was created after rev − 1: none is ahead of me.
          { key: this.prefix, range_end: prefixEnd(this.prefix), target: etcd3.CompareTarget.Create, result: etcd3.CompareResult.Greater, create_revision: String(rev - 1n) },
        ],
        [{ request_put: { key: keyBuf, value, lease: slot.epoch.leaseId } }],
        [
          { request_range: { key: keyBuf } },
          {
            request_range: {
              key: this.prefix,
              range_end: prefixEnd(this.prefix),
              max_create_revision: String(rev - 1n),
              sort_order: etcd3.SortOrder.Descend,
              sort_target: etcd3.SortTarget.Create,
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
        throw new SessionExpiredError(`${this.what}: own key ${slot.key} disappeared while queued (session expired?)`);
      }
      const pred = res.responses[1]?.response_range.kvs[0];
      if (!pred) continue; // it went between the compare and the read: look again
      refuseNested(this.prefix, pred.key);
      await this.#waitFor(pred, signal);
    }
  }

  async #waitFor(pred: IKeyValue, signal: AbortSignal): Promise<void> {
    this.stats.predecessorWatches++;
    await waitDeleted(this.session.client, this.#txn, pred, signal, this.session.logger);
    this.stats.predecessorWakeups++;
  }

  /** Refreshes the key with a put guarded by `create_revision == rev`; resolves with the put's revision (the fence). */
  async #claim(slot: Slot, value: Buffer, signal: AbortSignal): Promise<bigint> {
    const res = await this.txn([this.ownerCompare(slot.keyBuf, slot.rev)], [{ request_put: { key: slot.keyBuf, value, lease: slot.epoch.leaseId } }], [], signal);
    if (!res.succeeded) throw new SessionExpiredError(`${this.what}: own key ${slot.key} disappeared before it could be claimed`);
    return BigInt(res.header.revision);
  }

  /**
   * Deletes the slot's key if it is still the one created at its revision, and the tail hint if it
   * still names that key (put in the same txn: mod_revision == the key's create_revision), so the
   * next join does not queue behind a key that is gone. Resolves with whether it did.
   */
  async remove(slot: Slot, timeoutMs = REMOVE_MS): Promise<boolean> {
    const ctl = new AbortController();
    const timer = setTimeout(() => ctl.abort(new TenureError(`${this.what}: delete of ${slot.key} timed out`)), timeoutMs);
    const tail: IRequestOp = {
      request_txn: {
        compare: [{ key: this.#tail, target: etcd3.CompareTarget.Mod, result: etcd3.CompareResult.Equal, mod_revision: String(slot.rev) }],
        success: [{ request_delete_range: { key: this.#tail } }],
        failure: [],
      },
    };
    try {
      const del: IRequestOp = { request_delete_range: { key: slot.keyBuf } };
      const res = await this.txn([this.ownerCompare(slot.keyBuf, slot.rev)], slot.hinted ? [del, tail] : [del], [], ctl.signal).catch((e: unknown) => {
        throw ctl.signal.aborted ? ctl.signal.reason : e;
      });
      return res.succeeded;
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * Joins the queue on the session's live lease (granting a new one after a loss), waits for the
   * head and claims the fence. On any failure or abort the key is removed (owner-checked) and the
   * error is rethrown: SessionExpiredError when the session or the key is gone, `signal.reason`
   * when the caller aborted. With `tryOnly`, resolves undefined when anyone is ahead.
   */
  async acquire(value: Buffer, signal: AbortSignal, opts: { tryOnly?: boolean } = {}): Promise<{ slot: Slot; fence: bigint } | undefined> {
    try {
      return await this.#acquireOn(await this.session.live(signal, this.what), value, signal, opts);
    } catch (e) {
      // The lease was revoked before a keepalive could tell the session, or the claim was read
      // past the lease's local deadline: that lease is lost; go again (once) on a new one.
      if (e instanceof LateClaimError) {
        this.session.logger.warn({ err: e.cause }, `${this.what}: claim read past the lease's local deadline; queueing again on a new lease`);
      } else if (!revoked(e)) {
        throw e;
      }
      return this.#acquireOn(await this.session.live(signal, this.what), value, signal, opts);
    }
  }

  async #acquireOn(epoch: LeaseEpoch, value: Buffer, signal: AbortSignal, opts: { tryOnly?: boolean }): Promise<{ slot: Slot; fence: bigint } | undefined> {
    const key = `${this.name}/${epoch.leaseIdHex}`;
    const keyBuf = Buffer.from(key);
    const token = this.session.claimKey(key, this.what);
    let slot: Slot | undefined;
    let gone: SessionExpiredError | undefined;
    const joined = joinSignals(signal, epoch.signal);
    const scope = joined.signal;
    try {
      const queued = await this.#enqueue(keyBuf, epoch.leaseId, value, scope);
      slot = { epoch, key, keyBuf, rev: queued.rev, token, hinted: queued.hinted };
      if (opts.tryOnly) {
        let taken = queued.first?.pred !== undefined;
        if (!queued.first) {
          const res = await this.txn([], [{ request_range: { key: this.prefix, range_end: prefixEnd(this.prefix), max_create_revision: String(slot.rev - 1n), limit: 1, keys_only: true } }], [], scope);
          // (count ignores create_revision filters in etcd; the filtered kvs do not)
          const ahead = res.responses[0]?.response_range.kvs[0];
          if (ahead) refuseNested(this.prefix, ahead.key);
          taken = ahead !== undefined;
        }
        if (taken) {
          await this.#undo(slot);
          return undefined;
        }
      }
      let fence: bigint;
      if (queued.first && !queued.first.pred) {
        // At the head from the start: the enqueueing put is the newest write under the prefix.
        fence = this.#fenceAtEnqueue ? slot.rev : await this.#claim(slot, value, scope);
      } else {
        // Queued behind someone: also watch the own key, so its loss rejects at once (etcd#19597).
        const detach = this.#ownWatch.attach(epoch, keyBuf, slot.rev, slot.rev, () => joined.abort((gone = new SessionExpiredError(`${this.what}: own key ${key} was deleted (lease expired or revoked)`))));
        try {
          fence = await this.#waitAndClaim(slot, value, scope, queued.first?.pred ?? queued.hint);
        } finally {
          detach();
        }
      }
      // The claim committed while the lease lived, but its reply may have been read past the
      // local deadline (the process paused with it in its socket): by then the lease may have
      // expired at the server and a successor been granted. Not a grant: go again on a new lease.
      if (epoch.lost) throw new LateClaimError(this.session.expiredError(this.what, epoch));
      return { slot, fence };
    } catch (e) {
      if (revoked(e)) epoch.lose('expired', `etcd session: lease ${epoch.leaseId} was revoked`);
      if (slot) await this.#undo(slot);
      else this.session.freeKey(key, token);
      if (signal.aborted) throw signal.reason;
      if (epoch.signal.aborted && !(e instanceof LateClaimError) && !revoked(e)) throw this.session.expiredError(this.what, epoch);
      if (gone) throw gone;
      throw e;
    } finally {
      joined.dispose();
    }
  }

  async #undo(slot: Slot): Promise<void> {
    try {
      if (!slot.epoch.signal.aborted) await this.remove(slot, 2000);
    } catch (e) {
      this.session.logger.warn({ err: e, key: slot.key }, `${this.what}: could not remove own key; it goes with the session's lease`);
    } finally {
      this.session.freeKey(slot.key, slot.token);
    }
  }

  /** Ends the own-key watch (the recipe is closing). */
  close(): void {
    this.#ownWatch.close();
  }

  /**
   * The Lease for a claimed slot: aborts when the slot's session lease is lost or its local
   * deadline passes; release deletes the key (owner-checked).
   */
  lease(slot: Slot, fence: bigint, onEnd: () => void): LeaseController {
    let ended = false;
    const end = (): void => {
      if (ended) return;
      ended = true;
      this.session.freeKey(slot.key, slot.token);
      onEnd();
    };
    const ctl = new LeaseController({
      name: this.name,
      fence,
      parent: slot.epoch.signal,
      deadline: () => slot.epoch.deadline,
      clock: this.session.clock,
      logger: this.session.logger,
      release: async () => {
        try {
          if (!slot.epoch.signal.aborted) await this.remove(slot);
        } finally {
          end();
        }
      },
    });
    // The holder hears a deletion of its key from outside (lease revoked, key removed) as soon as
    // the next holder can be woken by the same deletion, not a keepalive later (see OwnKeyWatch).
    const detach = this.#ownWatch.attach(slot.epoch, slot.keyBuf, slot.rev, fence, () => ctl.lose('expired', undefined, `${this.what}: own key ${slot.key} was deleted (lease revoked or key removed)`));
    const onLost = (): void => {
      detach();
      // Lost, not released: the session lease is gone (or the key is); nothing left to delete.
      if (ctl.endReason !== 'released') end();
    };
    if (ctl.ended) onLost();
    else ctl.onEnd(onLost);
    return ctl;
  }
}
