import type { Stat } from 'node-zookeeper-client';
import { zookeeper } from './peer.js';
import { SessionExpiredError } from '../../core/errors.js';
import { isConnectionLoss, isNoNode, dropWatcher, zkCreateEphemeralSequential, zkExists, zkGetChildren, zkMkdirp, zkRemove } from './ops.js';
import { joinPath, protectedPrefix } from './paths.js';
import { mapZkError, type ZkAcl } from './acl.js';
import type { ZkConn, ZkSession } from './session.js';

/**
 * Node operations shared by every recipe, each bound to one ZooKeeper session (`conn`): calls
 * retried across connection loss while that session lives, protected creation, waiting for one
 * node to go, owner-checked deletion.
 */

/**
 * Settles like `promise`, or rejects with the reason of whichever signal aborts first. Listeners
 * are removed on settle (cheaper than `AbortSignal.any` on a hot path: no dependent signals pile
 * up on the long-lived session signal).
 */
export function raceSignals<T>(promise: Promise<T>, a: AbortSignal | undefined, b: AbortSignal): Promise<T> {
  if (a?.aborted || b.aborted) {
    promise.catch(() => undefined);
    return Promise.reject(a?.aborted ? a.reason : b.reason);
  }
  return new Promise<T>((resolve, reject) => {
    const onA = (): void => done(() => reject(a?.reason));
    const onB = (): void => done(() => reject(b.reason));
    const done = (f: () => void): void => {
      a?.removeEventListener('abort', onA);
      b.removeEventListener('abort', onB);
      f();
    };
    a?.addEventListener('abort', onA, { once: true });
    b.addEventListener('abort', onB, { once: true });
    promise.then(
      (v) => done(() => resolve(v)),
      (e) => done(() => reject(e)),
    );
  });
}

/** Runs `op` on `conn`'s client, retrying after a connection loss once reconnected to the same session. */
export async function retrying<T>(session: ZkSession, conn: ZkConn, signal: AbortSignal | undefined, op: () => Promise<T>): Promise<T> {
  for (;;) {
    signal?.throwIfAborted();
    if (conn.signal.aborted) throw conn.signal.reason;
    try {
      return await raceSignals(op(), signal, conn.signal);
    } catch (e) {
      if (!isConnectionLoss(e)) throw mapZkError(e);
      await session.whenConnected({ signal: signal ? AbortSignal.any([signal, conn.signal]) : conn.signal });
      if (session.conn() !== conn) throw new SessionExpiredError('zk session changed during a call');
    }
  }
}

/**
 * Creates `<base>/_c_<guid>-<lockName><seq>` (ephemeral sequential) with a fresh GUID, creating
 * `base` if needed. After a connection loss mid-create it looks for its own GUID among `base`'s
 * children before trying again, so a create that reached the server is found, not leaked.
 * Resolves with the full path and, when this attempt's create answered, the node's czxid (a node
 * found again after a connection loss has none: read its Stat).
 */
export async function createProtected(
  session: ZkSession,
  conn: ZkConn,
  base: string,
  lockName: string,
  data: Buffer,
  signal: AbortSignal | undefined,
  acl: ZkAcl[] | undefined = session.acl,
): Promise<{ path: string; czxid?: bigint }> {
  const prefix = protectedPrefix();
  let maybeCreated = false;
  for (;;) {
    signal?.throwIfAborted();
    if (conn.signal.aborted) throw conn.signal.reason;
    if (maybeCreated) {
      const children = await retrying(session, conn, signal, () => zkGetChildren(conn.client, base));
      const found = children.find((c) => c.startsWith(prefix));
      if (found) {
        session.logger.debug({ node: found }, 'protected creation found its node after a connection loss');
        return { path: joinPath(base, found) };
      }
    }
    try {
      return await zkCreateEphemeralSequential(conn.client, joinPath(base, prefix + lockName), data, acl);
    } catch (e) {
      if (isNoNode(e)) {
        await retrying(session, conn, signal, () => zkMkdirp(conn.client, base, acl));
        maybeCreated = false;
      } else if (isConnectionLoss(e)) {
        maybeCreated = true;
        await session.whenConnected({ signal: signal ? AbortSignal.any([signal, conn.signal]) : conn.signal });
        if (session.conn() !== conn) throw new SessionExpiredError('zk session changed during a create');
      } else {
        throw mapZkError(e, base);
      }
    }
  }
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
    let inFlight: Promise<unknown> = Promise.resolve();
    try {
      const stat = await retrying(session, conn, signal, () => {
        const call = zkExists(conn.client, path, watcher);
        inFlight = call.catch(() => undefined);
        return call;
      });
      if (stat === null) return;
      if (await raceSignals(gone, signal, conn.signal)) return;
      // A data change also fires the watch: look again.
      const still = await retrying(session, conn, signal, () => zkExists(conn.client, path));
      if (still === null) return;
    } finally {
      dropWatcher(conn.client, path, watcher);
      void inFlight.then(() => dropWatcher(conn.client, path, watcher));
    }
  }
}

/** The node's Stat on `conn`'s session, or null when it is gone. */
export function statOf(session: ZkSession, conn: ZkConn, path: string, signal?: AbortSignal): Promise<Stat | null> {
  return retrying(session, conn, signal, () => zkExists(conn.client, path));
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
