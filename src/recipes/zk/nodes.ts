import type { Stat } from 'node-zookeeper-client';
import { raceSignal } from '../../core/abort.js';
import { inWindow } from '../../core/window.js';
import { zookeeper } from './peer.js';
import { AcquireTimeoutError, SessionExpiredError, StoreUnavailableError } from '../../core/errors.js';
import { isConnectionLoss, isNoNode, dropWatcher, oneWrite, zkCreateEphemeralSequential, zkExists, zkGetChildren, zkMkdirp, zkRemove, type Watcher } from './ops.js';
import { joinPath, protectedPrefix } from './paths.js';
import { mapZkError, type ClientAcl } from './acl.js';
import type { ZkConn, ZkSession } from './session.js';

/**
 * Node operations shared by every recipe, each bound to one ZooKeeper session (`conn`): calls
 * retried across connection loss while that session lives, protected creation, waiting for one
 * node to go, owner-checked deletion. Every request is awaited against the caller's signal, the
 * session's end and the session's `callTimeoutMs`; what a caller gives up on is cleaned up in the
 * background (a create that lands later is found by its GUID and deleted).
 */

/**
 * How long a wait that ends without the lock (aborted, timed out, failed) still waits for the
 * delete of its own node before it rejects. Loopback answers in about a millisecond; on a silent
 * link the delete goes on in the background and the caller is not held past its bound.
 */
export const CLEANUP_GRACE_MS = 100;

/**
 * Awaits one request sent on `conn`: settles like `request`, or rejects with the reason of
 * `signal` or of the session's end. A request unanswered for the session's `callTimeoutMs` makes
 * the session drop the silent link (see `Liveness.watchRequest`), so it fails with a connection
 * loss like everything else in flight on it and the caller's retry takes over; with `failFast`
 * (a call that must not wait: tryAcquire, reads) it rejects at once with a StoreUnavailableError.
 */
export function awaitReply<T>(session: ZkSession, conn: ZkConn, signal: AbortSignal | undefined, request: Promise<T>, failFast = false): Promise<T> {
  let timedOut: ((e: Error) => void) | undefined;
  const silent = (): StoreUnavailableError => new StoreUnavailableError('zookeeper', session.connectionString, `no reply within callTimeoutMs (${session.callTimeoutMs} ms): the link is silent`);
  const sentAt = session.clock.now();
  // A fail-fast request lost with a link that another request's bound found silent fails as
  // silent at once: waiting for that link to heal is the wait it must not do.
  const bounded = failFast
    ? new Promise<T>((resolve, reject) => {
        timedOut = reject;
        request.then(resolve, (e: unknown) => reject(isConnectionLoss(e) && session.droppedSilentSince(sentAt) ? silent() : e));
      })
    : request;
  const disarm = session.armCallTimeout(failFast, () => timedOut?.(silent()));
  const reply = raceSignal(bounded, signal, conn.signal);
  reply.then(disarm, disarm);
  return reply;
}

/**
 * Waits until connected — after a connection loss, to `conn`'s ZooKeeper session again (rejects
 * if it changed). A `failFast` call waits `callTimeoutMs` at most, then rejects with
 * StoreUnavailableError — another request's bound may have dropped the silent link under it, and
 * a call that must not wait must not wait for the link to heal either.
 */
export async function reconnected(session: ZkSession, conn: ZkConn | undefined, signal: AbortSignal | undefined, failFast: boolean, during: string): Promise<void> {
  const joined = conn ? (signal ? AbortSignal.any([signal, conn.signal]) : conn.signal) : signal;
  try {
    await session.whenConnected(failFast ? { signal: joined, timeoutMs: session.callTimeoutMs } : { signal: joined });
  } catch (e) {
    if (failFast && e instanceof AcquireTimeoutError) {
      throw new StoreUnavailableError('zookeeper', session.connectionString, `not connected again within callTimeoutMs (${session.callTimeoutMs} ms)`, { cause: e });
    }
    throw e;
  }
  if (conn && session.conn() !== conn) throw new SessionExpiredError(`zk session changed during ${during}`);
}

/**
 * Runs `op` on `conn`'s client, retrying after a connection loss once reconnected to the same
 * session; with `failFast`, a request the server leaves unanswered for `callTimeoutMs` rejects
 * (StoreUnavailableError) instead of waiting for the reconnect.
 */
export async function retrying<T>(session: ZkSession, conn: ZkConn, signal: AbortSignal | undefined, op: () => Promise<T>, failFast = false): Promise<T> {
  for (;;) {
    signal?.throwIfAborted();
    if (conn.signal.aborted) throw conn.signal.reason;
    try {
      return await awaitReply(session, conn, signal, op(), failFast);
    } catch (e) {
      if (!isConnectionLoss(e)) throw mapZkError(e);
      await reconnected(session, conn, signal, failFast, 'a call');
    }
  }
}

/**
 * Creates `<base>/_c_<guid>-<lockName><seq>` (ephemeral sequential) with a fresh GUID, creating
 * `base` if needed. After a connection loss mid-create it looks for its own GUID among `base`'s
 * children before trying again, so a create that reached the server is found, not leaked.
 * Resolves with the full path and, when this attempt's create answered, the node's czxid (a node
 * found again after a connection loss has none: read its Stat). With `list`, `base`'s listing is
 * requested right behind the create, without waiting for its reply: ZooKeeper answers a session's
 * requests in order, so that listing already holds the new node and queueing is one round trip
 * (`children`, present when the create answered; it may still fail like any request). `list` a
 * watcher: that listing also sets it as a child watch on `base`. The two requests leave in one
 * write (one system call, one segment: each write on loopback costs the client about as much as
 * the rest of a request's work).
 *
 * Every phase races `signal` (the create in flight too). A create abandoned with its outcome
 * unknown — still in flight, or lost with the connection — may still land: a reply can come after
 * the caller gave up, and a request held on a silent link reaches the server when it heals. Its
 * node is swept in the background (see sweepProtected), so it never sits in the queue blocking
 * the participants behind it until the session dies.
 */
export function createProtected(
  session: ZkSession,
  conn: ZkConn,
  base: string,
  lockName: string,
  data: Buffer,
  signal: AbortSignal | undefined,
  acl: ClientAcl[] | undefined = session.acl,
  failFast = false,
  list: boolean | Watcher = false,
): Promise<Created> {
  // (within the session's window of joins in flight: see core/window.ts)
  return inWindow(session, signal, () => createProtectedNow(session, conn, base, lockName, data, signal, acl, failFast, list));
}

/** What a protected create made: see createProtected. */
export interface Created {
  path: string;
  czxid?: bigint;
  children?: Promise<string[]>;
}

async function createProtectedNow(
  session: ZkSession,
  conn: ZkConn,
  base: string,
  lockName: string,
  data: Buffer,
  signal: AbortSignal | undefined,
  acl: ClientAcl[] | undefined,
  failFast: boolean,
  list: boolean | Watcher,
): Promise<Created> {
  const prefix = protectedPrefix();
  let maybeCreated = false;
  let inFlight: Promise<{ path: string }> | undefined;
  try {
    for (;;) {
      signal?.throwIfAborted();
      if (conn.signal.aborted) throw conn.signal.reason;
      if (maybeCreated) {
        const children = await retrying(session, conn, signal, () => zkGetChildren(conn.client, base), failFast);
        const found = children.find((c) => c.startsWith(prefix));
        if (found) {
          session.logger.debug({ node: found }, 'protected creation found its node after a connection loss');
          maybeCreated = false;
          return { path: joinPath(base, found) };
        }
        // Listed on the reconnected session and not there: the lost create never ran and now
        // never will (the server closed the old connection when the session moved).
        maybeCreated = false;
      }
      const [create, children] = oneWrite(conn.client, () => [
        zkCreateEphemeralSequential(conn.client, joinPath(base, prefix + lockName), data, acl),
        list ? zkGetChildren(conn.client, base, typeof list === 'function' ? list : undefined) : undefined,
      ]);
      children?.catch(() => undefined); // (awaited by the caller, or dropped with a failed create)
      inFlight = create;
      try {
        const created = await awaitReply(session, conn, signal, create, failFast);
        inFlight = undefined;
        return children ? { ...created, children } : created;
      } catch (e) {
        if (isNoNode(e)) {
          inFlight = undefined;
          await retrying(session, conn, signal, () => zkMkdirp(conn.client, base, acl), failFast);
        } else if (isConnectionLoss(e)) {
          inFlight = undefined;
          maybeCreated = true;
          await reconnected(session, conn, signal, failFast, 'a create');
        } else {
          throw mapZkError(e, base);
        }
      }
    }
  } catch (e) {
    if (inFlight || maybeCreated) sweepProtected(session, conn, base, prefix, inFlight);
    throw e;
  }
}

/**
 * Cleans up after a protected create given up on with its outcome unknown, in the background:
 * when the create still in flight answers, its node is deleted; after a connection loss, the node
 * is looked for by its GUID once the same session is connected again, and deleted. Ends when done
 * or when the ZooKeeper session ends (its ephemeral nodes go with it). Never rejects.
 */
function sweepProtected(session: ZkSession, conn: ZkConn, base: string, prefix: string, inFlight: Promise<{ path: string }> | undefined): void {
  const sweep = async (): Promise<void> => {
    if (inFlight) {
      const outcome = await inFlight.then(
        (created) => created.path,
        (e: unknown) => (isConnectionLoss(e) ? undefined : null),
      );
      if (outcome === null) return; // refused by the server: no node
      if (outcome !== undefined) {
        session.logger.debug({ node: outcome }, 'an abandoned create landed: deleting its node');
        return deleteEventually(session, conn, outcome);
      }
    }
    await untilDone(session, conn, async () => {
      const children = await retrying(session, conn, undefined, () => zkGetChildren(conn.client, base));
      const found = children.find((c) => c.startsWith(prefix));
      if (found) {
        session.logger.debug({ node: found }, 'an abandoned create landed before a connection loss: deleting its node');
        await deleteOwnNode(session, conn, joinPath(base, found));
      }
    });
  };
  sweep().catch((err: unknown) => session.logger.warn({ err, base }, 'could not sweep an abandoned lock node'));
}

/**
 * Runs `step` once `conn`'s session is connected, again after each transport failure, until it
 * succeeds or the ZooKeeper session ends (or the session is closed). Other errors reject.
 */
async function untilDone(session: ZkSession, conn: ZkConn, step: () => Promise<void>): Promise<void> {
  for (;;) {
    if (conn.signal.aborted || session.closed) return;
    try {
      await session.whenConnected({ signal: conn.signal });
      if (session.conn() !== conn) return;
      return await step();
    } catch (e) {
      if (conn.signal.aborted || session.closed || isNoNode(e)) return;
      if (!(e instanceof StoreUnavailableError)) throw e;
      session.logger.debug({ err: e }, 'zk cleanup: store unavailable; retrying');
    }
  }
}

/**
 * Deletes our node for sure: retried across connection loss and outages until it is gone or its
 * session ends (then it is gone too). Never rejects; what cannot be deleted is logged.
 */
export function deleteEventually(session: ZkSession, conn: ZkConn, path: string): Promise<void> {
  return untilDone(session, conn, () => deleteOwnNode(session, conn, path)).catch((err: unknown) => session.logger.warn({ err, path }, 'could not delete an abandoned lock node'));
}

/**
 * Waits for a cleanup (a delete that goes on by itself) for at most `maxMs`, and at most
 * CLEANUP_GRACE_MS once `signal` has aborted: a wait settles within its own bound, not a silent
 * link's, and the cleanup goes on in the background. Never rejects; a failure is logged.
 */
export function awaitCleanup(session: ZkSession, cleanup: Promise<unknown>, maxMs: number, signal?: AbortSignal): Promise<void> {
  return new Promise<void>((resolve) => {
    let grace: NodeJS.Timeout | undefined;
    const done = (): void => {
      clearTimeout(bound);
      clearTimeout(grace);
      signal?.removeEventListener('abort', onAbort);
      resolve();
    };
    const onAbort = (): void => void (grace ??= setTimeout(done, CLEANUP_GRACE_MS));
    const bound = setTimeout(done, maxMs);
    if (signal?.aborted) onAbort();
    else signal?.addEventListener('abort', onAbort, { once: true });
    cleanup.then(done, (err: unknown) => {
      session.logger.warn({ err }, 'zk cleanup failed');
      done();
    });
  });
}

/**
 * Resolves once `path` does not exist (at once if it is already gone), watching that one node
 * only. Rejects when `signal` or the session aborts; the watcher is removed on every exit.
 */
export async function waitForDeletion(session: ZkSession, conn: ZkConn, path: string, signal: AbortSignal | undefined): Promise<void> {
  for (;;) {
    let fired!: (deleted: boolean) => void;
    const gone = new Promise<boolean>((resolve) => (fired = resolve));
    const watcher = (event: unknown): void => {
      session.countWatchEvent();
      fired((event as { getType?: () => number }).getType?.() === zookeeper.Event.NODE_DELETED);
    };
    // The client registers the watcher when the reply arrives: an exists still in flight when the
    // wait is abandoned would register it after the drop below, so drop it again once it settles.
    let inFlight: Promise<unknown> | undefined;
    try {
      const stat = await retrying(session, conn, signal, () => {
        const call = zkExists(conn.client, path, watcher);
        inFlight = call.catch(() => undefined);
        return call;
      });
      inFlight = undefined; // answered: its watcher is registered already
      if (stat === null) return;
      if (await raceSignal(gone, signal, conn.signal)) return;
      // A data change also fires the watch: look again.
      const still = await retrying(session, conn, signal, () => zkExists(conn.client, path));
      if (still === null) return;
    } finally {
      dropWatcher(conn.client, path, watcher);
      void inFlight?.then(() => dropWatcher(conn.client, path, watcher));
    }
  }
}

/** The node's Stat on `conn`'s session, or null when it is gone. */
export function statOf(session: ZkSession, conn: ZkConn, path: string, signal?: AbortSignal, failFast = false): Promise<Stat | null> {
  return retrying(session, conn, signal, () => zkExists(conn.client, path), failFast);
}

/**
 * Deletes our node if its session is still the current one (otherwise it died with the session).
 * Retries across connection loss until deleted or the session ends. Never rejects for a missing node.
 */
export async function deleteOwnNode(session: ZkSession, conn: ZkConn, path: string): Promise<void> {
  if (conn.signal.aborted) return;
  try {
    await retrying(session, conn, undefined, () => zkRemove(conn.client, path));
  } catch (e) {
    if (conn.signal.aborted) return; // the session ended: its ephemeral node went with it
    throw e;
  }
}
