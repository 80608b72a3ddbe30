import type { LeaderInfo } from '../../core/candidate.js';
import { raceSignal, sleep } from '../../core/abort.js';
import { Backoff } from '../../core/backoff.js';
import { retrying } from './nodes.js';
import { dropWatcher, isNoNode, zkExists, zkGetChildren, zkGetData } from './ops.js';
import { joinPath, longToBigInt, sortBySequence } from './paths.js';
import type { ZkSession } from './session.js';

/** One queued participant of a latch or lock, in queue order. */
export interface Participant {
  /** Its id (the node's data). */
  readonly id: string;
  /** Its node's full path. */
  readonly path: string;
  /** The node's czxid: the fence it holds (or will hold) with. */
  readonly fence: bigint;
  /** True for the first in the queue (the leader or holder). */
  readonly isLeader: boolean;
}

/**
 * Every participant queued under `base`, first (the holder) first. Here and in readLeader, reads
 * are one-shot calls: a request the server leaves unanswered for `callTimeoutMs` rejects with a
 * StoreUnavailableError rather than waiting for a reconnect.
 */
export async function readParticipants(session: ZkSession, base: string, queueNames: readonly string[], signal?: AbortSignal): Promise<Participant[]> {
  const conn = session.conn();
  const children = await retrying(session, conn, signal, () => zkGetChildren(conn.client, base), true).catch((e: unknown) => {
    if (isNoNode(e)) return [] as string[];
    throw e;
  });
  const out: Participant[] = [];
  for (const name of sortBySequence(children, queueNames)) {
    const path = joinPath(base, name);
    const node = await retrying(session, conn, signal, () => zkGetData(conn.client, path), true);
    if (node) out.push({ id: node.data.toString('utf8'), path, fence: longToBigInt(node.stat.czxid), isLeader: out.length === 0 });
  }
  return out;
}

/** The first participant under `base` (the leader or holder), or undefined when nobody is queued. */
export async function readLeader(session: ZkSession, base: string, queueNames: readonly string[], signal?: AbortSignal): Promise<LeaderInfo | undefined> {
  const conn = session.conn();
  for (;;) {
    const children = await retrying(session, conn, signal, () => zkGetChildren(conn.client, base), true).catch((e: unknown) => {
      if (isNoNode(e)) return [] as string[];
      throw e;
    });
    const head = sortBySequence(children, queueNames)[0];
    if (head === undefined) return undefined;
    const node = await retrying(session, conn, signal, () => zkGetData(conn.client, joinPath(base, head)), true);
    if (node) return { id: node.data.toString('utf8'), fence: longToBigInt(node.stat.czxid) };
    // The head went between the two reads: look again.
  }
}

/**
 * Leader changes under `base`: the current leader first (undefined when nobody is queued), then
 * every change. Watches one node only: the head (for its deletion) or, while nobody is queued,
 * the children of `base` (for the first joiner). Survives reconnects and session loss.
 */
export async function* observeLeader(session: ZkSession, base: string, queueNames: readonly string[], signal: AbortSignal): AsyncGenerator<LeaderInfo | undefined, void, undefined> {
  let first = true;
  let last: LeaderInfo | undefined;
  const backoff = new Backoff({ initialMs: 50, maxMs: 1000 });
  for (;;) {
    signal.throwIfAborted();
    let fired!: () => void;
    const changed = new Promise<void>((r) => (fired = r));
    const watcher = (): void => fired();
    let watched: string | undefined;
    let conn;
    try {
      await session.whenConnected({ signal });
      conn = session.conn();
      const c = conn;
      const children = await retrying(session, c, signal, () => zkGetChildren(c.client, base)).catch((e: unknown) => {
        if (isNoNode(e)) return undefined;
        throw e;
      });
      let now: LeaderInfo | undefined;
      if (children === undefined) {
        // No base node yet: watch for its creation.
        watched = base;
        if ((await retrying(session, c, signal, () => zkExists(c.client, base, watcher))) !== null) continue;
      } else {
        const head = sortBySequence(children, queueNames)[0];
        if (head === undefined) {
          watched = base;
          const again = await retrying(session, c, signal, () => zkGetChildren(c.client, base, watcher));
          if (sortBySequence(again, queueNames).length > 0) continue;
        } else {
          watched = joinPath(base, head);
          const path = watched;
          const node = await retrying(session, c, signal, () => zkGetData(c.client, path, watcher));
          if (!node) continue;
          now = { id: node.data.toString('utf8'), fence: longToBigInt(node.stat.czxid) };
        }
      }
      backoff.reset();
      if (first || last?.id !== now?.id || last?.fence !== now?.fence) {
        first = false;
        last = now;
        yield now;
      }
      await raceSignal(changed, signal, c.signal);
    } catch (e) {
      if (signal.aborted) throw signal.reason;
      if (session.closed) throw e;
      session.logger.debug({ err: e, base }, 'observe: read failed; retrying');
      await sleep(backoff.next(), signal);
    } finally {
      if (watched !== undefined && conn) dropWatcher(conn.client, watched, watcher);
    }
  }
}
