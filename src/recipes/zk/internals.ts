import { LeaseController } from '../../core/lease.js';
import { NodeGoneError, type DriverVerdict, type LockDriver } from './drivers.js';
import { awaitCleanup, CLEANUP_GRACE_MS, createProtected, deleteEventually, deleteOwnNode, reconnected, retrying, statOf, waitForDeletion } from './nodes.js';
import type { Client } from 'node-zookeeper-client';
import { dropWatcher, oneWrite, zkExists, zkGetChildren } from './ops.js';
import { zookeeper } from './peer.js';
import { joinPath, longToBigInt, sortBySequence } from './paths.js';
import type { ZkConn, ZkSession } from './session.js';
import type { ClientAcl } from './acl.js';

/** A node that holds a lock: its path, its fence (czxid), its session and the epoch it was claimed in. */
export interface HeldNode {
  readonly path: string;
  readonly fence: bigint;
  readonly conn: ZkConn;
  readonly epoch: AbortSignal;
  /** The watch on the node itself, set when it was queued. */
  readonly own: OwnNodeWatch;
}

/**
 * A participant's watch on its own node, so a holder hears its node deleted from outside (a lease
 * ended by an admin, a session expired elsewhere) as soon as its successor is woken by the same
 * deletion. Armed one of two ways, neither a request on the grant's path:
 * - with the first verdict (a waiter, and a participant not known to be alone): an `exists`
 *   watch, sent in the same write as a waiter's predecessor watch, or as a holder's listing says
 *   it holds, ahead of the grant (at once for a node found again after a connection loss);
 * - through the first listing itself, for a participant expected to hold at once (its previous
 *   first listing showed it alone): the listing carries a child watch on the queue's parent
 *   (`listingWatcher`), and only when that fires — a successor joined, or a node left — is the
 *   `exists` watch sent. Until a successor exists there is nobody to be as fast as; a join arms
 *   the own-node watch one round trip after it, while the successor's own first listing and
 *   predecessor watch are still on their way, and a deletion is heard on the child watch itself.
 *   An uncontended cycle is then 3 requests in 2 round trips (create and listing in one write,
 *   the delete), where it was 4: the floor's create and delete plus the listing.
 * The price: a waiter has two server watches (its predecessor, its own node), as on etcd; a
 * participant that expected to be alone and was not has a child watch on the parent until the
 * next change there, heard once and ignored.
 */
export class OwnNodeWatch {
  #path: string | undefined;
  #armed = false;
  #listingChanged = false;
  #gone = false;
  #dropped = false;
  #onGone: (() => void) | undefined;
  readonly #watcher = (event: unknown): void => {
    if ((event as { getType?: () => number }).getType?.() === zookeeper.Event.NODE_DELETED) this.#fire();
  };

  /** The child watch for a first listing sent by a participant expected to be alone (see the class note). */
  readonly listingWatcher = (): void => {
    this.#listingChanged = true;
    this.arm();
  };

  constructor(
    readonly client: Client,
    /** The queue's parent (where `listingWatcher` is set). */
    readonly base: string,
  ) {}

  /** The node is created: arms the watch now (`armNow`), or when the listing's child watch fires. */
  attach(path: string, armNow: boolean): this {
    this.#path = path;
    if (armNow || this.#listingChanged) this.arm();
    return this;
  }

  /** Sends the `exists` watch on the node (once). */
  arm(): void {
    const path = this.#path;
    if (this.#armed || this.#dropped || path === undefined) return;
    this.#armed = true;
    void zkExists(this.client, path, this.#watcher).then((stat) => stat === null && this.#fire(), () => undefined);
  }

  /** True once the node is known gone. */
  get gone(): boolean {
    return this.#gone;
  }

  /** Calls `fn` when the node is deleted (at once if it is known gone). */
  onGone(fn: () => void): void {
    this.#onGone = fn;
    if (this.#gone) fn();
  }

  /** Stops listening (a server-side watch fires once more, when its node changes, and is ignored). */
  drop(): void {
    if (this.#dropped) return;
    this.#dropped = true;
    this.#onGone = undefined;
    dropWatcher(this.client, this.base, this.listingWatcher);
    if (this.#path !== undefined) dropWatcher(this.client, this.#path, this.#watcher);
  }

  #fire(): void {
    if (this.#gone || this.#dropped) return;
    this.#gone = true;
    this.#onGone?.();
  }
}

/**
 * The one loop behind every ZooKeeper lock recipe (Curator's LockInternals idea): create a
 * protected ephemeral sequential node, ask the driver whether it holds, otherwise watch the one
 * node the driver names and ask again when it goes. Before claiming, the node's ephemeralOwner
 * must be the current session (CURATOR-696). When the session ends while waiting, it re-queues on
 * the new one; when the caller's signal aborts, it deletes its node before rejecting.
 *
 * Every phase races the caller's signal — the create in flight, the listing, the predecessor
 * watch, the wait for a reconnect — so a wait settles within its `timeoutMs`/`signal` even on a
 * silent link (TCP open, nothing delivered). What it gave up on is cleaned up in the background:
 * its node is deleted (awaited for CLEANUP_GRACE_MS at most), a create still in flight is swept
 * when it lands (nodes.ts). A `tryOnly` call does not wait for the server either: a request left
 * unanswered for the session's `callTimeoutMs` rejects with StoreUnavailableError.
 */
export class LockInternals {
  /** This participant's last first listing showed it alone: the next one arms its own-node watch through the listing (see OwnNodeWatch). */
  #alone = false;

  constructor(
    readonly session: ZkSession,
    readonly base: string,
    /** The ACL of the nodes this recipe creates. @default the session's `acl` */
    readonly acl: ClientAcl[] | undefined = session.acl,
  ) {}

  /** Queues, waits and claims; with `tryOnly`, resolves undefined (node deleted) when it does not hold at once. */
  async acquire(driver: LockDriver, signal: AbortSignal, data: Buffer, onQueued?: (path: string) => void): Promise<HeldNode>;
  async acquire(driver: LockDriver, signal: AbortSignal, data: Buffer, onQueued: ((path: string) => void) | undefined, tryOnly: true): Promise<HeldNode | undefined>;
  async acquire(driver: LockDriver, signal: AbortSignal, data: Buffer, onQueued?: (path: string) => void, tryOnly = false): Promise<HeldNode | undefined> {
    const session = this.session;
    for (;;) {
      signal.throwIfAborted();
      // (connected: nothing to wait for; `conn()` throws for a closed session as the wait would)
      if (!session.connected) await reconnected(session, undefined, signal, tryOnly, 'a wait');
      const conn = session.conn();
      let path: string | undefined;
      const alone = this.#alone;
      const own = new OwnNodeWatch(conn.client, this.base);
      try {
        // The first listing rides right behind the create (one round trip to queue: see createProtected).
        // Only the create's path and zxid are kept: its listing (every child's name) is read once
        // and dropped, or each waiter held up to the whole queue for its whole wait (10,000
        // waiters in one process: ~420 KiB of names each).
        const created = await createProtected(session, conn, this.base, driver.lockName, data, signal, this.acl, tryOnly, alone ? own.listingWatcher : true);
        let listing = created.children;
        created.children = undefined;
        path = created.path;
        // (a node found again after a connection loss has no listing of its own: watch it at once)
        own.attach(path, listing === undefined);
        onQueued?.(path);
        // The fence is the create's own zxid (czxid). A node found again after a connection loss
        // has none: its Stat (czxid, ephemeralOwner) is read once, pipelined with the first
        // getChildren (ZooKeeper answers a session's requests in order: no extra round trip).
        const ownStat = created.czxid === undefined ? statOf(session, conn, path, signal, tryOnly) : undefined;
        ownStat?.catch(() => undefined);
        let first = true;
        // The first listing carried the child watch and showed ours alone: that watch arms the
        // own-node one (see OwnNodeWatch). Otherwise it is armed with the verdict.
        let watchedByListing = false;
        /** The driver's verdict on a listing: the pipelined first one, then one of its own. */
        const judge = (ours: string): Promise<DriverVerdict> =>
          retrying(
            session,
            conn,
            signal,
            () => {
              const sent = listing;
              listing = undefined;
              first &&= sent !== undefined; // (a listing of its own carries no child watch)
              return sent ?? zkGetChildren(conn.client, this.base);
            },
            tryOnly,
          ).then((children) => {
            if (first) {
              // Not alone — a node joined between our create and the listing, which that
              // listing's child watch never hears of — or no watch asked: armed with the verdict.
              this.#alone = children.length === 1;
              watchedByListing = alone && this.#alone;
            }
            first = false;
            return driver.checkChildren ? driver.checkChildren(children, ours) : driver.check(sortBySequence(children, driver.queueNames), ours);
          });
        // Known without a listing: the only node ahead of ours was deleted (see DriverVerdict).
        let known: DriverVerdict | undefined;
        for (;;) {
          const verdict = known ?? (await judge(path));
          if (!verdict.holds && tryOnly) {
            own.drop();
            const removal = deleteEventually(session, conn, path);
            path = undefined;
            await awaitCleanup(session, removal, session.callTimeoutMs, signal);
            return undefined;
          }
          if (!verdict.holds) {
            session.logger.debug({ node: path, watch: verdict.watch }, 'waiting for predecessor');
            const predecessor = joinPath(this.base, verdict.watch);
            // A waiter's own-node watch and its predecessor watch leave in one write.
            await oneWrite(conn.client, () => {
              own.arm();
              return waitForDeletion(session, conn, predecessor, signal);
            });
            if (verdict.lastAhead) known = { holds: true };
            continue;
          }
          let fence = created.czxid;
          if (ownStat) {
            const stat = await ownStat;
            // CURATOR-696: a node found by its GUID must belong to this session.
            if (!stat || stat.ephemeralOwner.toString('hex') !== conn.sessionId) throw new NodeGoneError(path);
            fence = longToBigInt(stat.czxid);
          }
          if (!watchedByListing) own.arm();
          if (session.conn() !== conn || own.gone) throw new NodeGoneError(path);
          // The verdict holds only while our session is surely alive at the server: `connected`
          // checks the local deadline now (a listing read past it, after a pause, may be stale).
          if (!session.connected) {
            await reconnected(session, conn, signal, tryOnly, 'a claim');
            continue;
          }
          session.logger.debug({ node: path }, 'holds');
          return { path, fence: fence!, conn, epoch: session.signal, own };
        }
      } catch (e) {
        own.drop();
        if (path !== undefined) {
          // Cancellation cleans up: delete the queued node before rejecting when the server answers
          // at once; while disconnected or silent, the delete goes on in the background until done
          // (or the node dies with the session) and the caller is not held up.
          const removal = deleteEventually(session, conn, path);
          await awaitCleanup(session, removal, session.connected ? CLEANUP_GRACE_MS : 0);
        }
        if (signal.aborted) throw signal.reason;
        if (e instanceof NodeGoneError || conn.signal.aborted) {
          session.logger.info({ base: this.base }, 're-queueing: our node or session is gone');
          continue;
        }
        throw e;
      }
    }
  }

  /**
   * A lease for a held node: its signal derives from the epoch it was claimed in and the session's
   * local deadline; `release()` deletes the node (owner-checked: only while its session lives).
   * When the lease is lost rather than released, the node is deleted as soon as the session can,
   * so a demoted holder never blocks the queue.
   */
  lease(name: string, held: HeldNode, onEnd?: () => void): LeaseController {
    const session = this.session;
    const ctl = new LeaseController({
      name,
      fence: held.fence,
      parent: held.epoch,
      deadline: () => session.deadline(),
      clock: session.clock,
      logger: session.logger,
      // A release the store did not confirm rejects, and the delete goes on in the background:
      // a node left behind would block the queue until the session dies.
      release: () =>
        deleteOwnNode(session, held.conn, held.path).catch((e: unknown) => {
          void deleteEventually(session, held.conn, held.path);
          throw e;
        }),
    });
    // The holder hears its own node deleted from outside through the watch set when it queued
    // (OwnNodeWatch), as its successor is woken by the same deletion, not a heartbeat later.
    const { own } = held;
    if (!ctl.ended) own.onGone(() => ctl.lose('expired', undefined, `${name}: our node ${held.path} was deleted`));
    const onAbort = (): void => {
      own.drop();
      onEnd?.();
      if (ctl.endReason !== 'released') void deleteOwnNode(session, held.conn, held.path).catch(() => undefined);
    };
    // Claimed in an epoch that has ended already: ends at once (on a microtask, after the caller has the controller).
    ctl.onEnd(onAbort);
    return ctl;
  }

  /**
   * Gives back a lease won just as its caller gave up: released at once, awaited for
   * CLEANUP_GRACE_MS at most (a silent link must not hold up the caller's rejection).
   */
  giveBack(ctl: LeaseController): Promise<void> {
    return awaitCleanup(this.session, ctl.release(), CLEANUP_GRACE_MS);
  }

}
