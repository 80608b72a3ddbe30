import { LeaseEmitter } from '../../core/lease-events.js';
import { raceSignal, waitScope } from '../../core/abort.js';
import type { Lease } from '../../core/lease.js';
import { optionalSignal, requireNumber, requireOptions } from '../../core/validate.js';
import { NodeGoneError } from './drivers.js';
import { CloseGuard, requireSession } from './guard.js';
import { LockInternals, OwnNodeWatch } from './internals.js';
import { InterProcessMutex } from './mutex.js';
import { readParticipants, type Participant } from './leader.js';
import { WAIT_KEYS, type WaitOptions } from '../../core/options.js';
import { awaitCleanup, CLEANUP_GRACE_MS, createProtected, deleteEventually, retrying, statOf } from './nodes.js';
import { dropWatcher, zkGetChildren } from './ops.js';
import { joinPath, longToBigInt, nodeName, validatePath } from './paths.js';
import type { ZkSession } from './session.js';

const LEASE_NAME = 'lease-';

/**
 * A counting semaphore (Curator's InterProcessSemaphoreV2): at most `maxLeases` leases exist at
 * once under `<path>/leases`. Acquirers queue on a mutex at `<path>/locks`, so only the head of
 * the line waits for a lease to free (one watch, no herd); it creates its lease nodes (protected)
 * and keeps them while the count of lease nodes exceeds `maxLeases`. Every failure path deletes
 * the nodes it created, and lease nodes are ephemeral, so a crash or a timeout leaves no orphaned
 * lease (CURATOR-335, CURATOR-462).
 */
export class InterProcessSemaphoreV2 extends LeaseEmitter implements AsyncDisposable {
  /** The semaphore's path. */
  readonly path: string;
  /** How many leases it hands out at once. */
  readonly maxLeases: number;
  readonly #session: ZkSession;
  readonly #leasesPath: string;
  readonly #locksPath: string;
  readonly #internals: LockInternals;
  readonly #guard: CloseGuard;
  readonly #held = new Set<Lease>();

  constructor(session: ZkSession, path: string, maxLeases: number) {
    super();
    this.#session = requireSession(session);
    this.path = validatePath('path', path);
    this.maxLeases = requireNumber('maxLeases', maxLeases, { integer: true, min: 1 });
    this.#leasesPath = joinPath(this.path, 'leases');
    this.#locksPath = joinPath(this.path, 'locks');
    this.#internals = new LockInternals(this.#session, this.#leasesPath);
    this.#guard = new CloseGuard(`semaphore ${this.path}`);
  }

  /** Waits for `qty` leases (all or none) and returns them individually. @default qty 1 */
  async acquire(qty = 1, options?: WaitOptions): Promise<Lease[]> {
    requireNumber('qty', qty, { integer: true, min: 1, max: this.maxLeases });
    const o = requireOptions('options', options, WAIT_KEYS);
    optionalSignal('signal', o.signal);
    this.#guard.throwIfClosed();
    const scope = waitScope(`${this.#guard.what}: acquire`, { signal: this.#guard.join(o.signal), timeoutMs: o.timeoutMs });
    const lock = new InterProcessMutex(this.#session, this.#locksPath);
    const leases: Lease[] = [];
    try {
      const turn = await lock.acquire({ signal: scope.signal });
      try {
        for (let i = 0; i < qty; i++) leases.push(await this.#one(scope.signal));
      } finally {
        // Our turn at the head of the line ends with the leases (or without them). Its delete is
        // awaited while the wait lives (within the session's callTimeoutMs); on a silent link it
        // goes on in the background and does not hold the caller past its bound.
        await awaitCleanup(this.#session, turn.release(), this.#session.callTimeoutMs, scope.signal);
      }
      scope.signal.throwIfAborted(); // won just as the caller gave up: the catch gives them back
      for (const l of leases) {
        if (l.signal.aborted) continue;
        this.#held.add(l);
        l.signal.addEventListener('abort', () => this.#held.delete(l), { once: true });
      }
      for (const l of leases) this.announce(l);
      return leases;
    } catch (e) {
      await awaitCleanup(this.#session, Promise.all(leases.map((l) => l.release())), scope.signal.aborted ? CLEANUP_GRACE_MS : this.#session.callTimeoutMs);
      throw e;
    } finally {
      scope.dispose();
      // The turn was released above (or never taken): closing only ends the object.
      void lock.close().catch(() => undefined);
    }
  }

  async #one(signal: AbortSignal): Promise<Lease> {
    const session = this.#session;
    for (;;) {
      await session.whenConnected({ signal });
      const conn = session.conn();
      let path: string | undefined;
      let own: OwnNodeWatch | undefined;
      try {
        path = (await createProtected(session, conn, this.#leasesPath, LEASE_NAME, Buffer.from(conn.sessionId), signal)).path;
        for (;;) {
          let fired!: () => void;
          const changed = new Promise<void>((r) => (fired = r));
          const watcher = (): void => {
            session.countWatchEvent();
            fired();
          };
          try {
            const children = await retrying(session, conn, signal, () => zkGetChildren(conn.client, this.#leasesPath, watcher));
            if (!children.includes(nodeName(path))) throw new NodeGoneError(path);
            if (children.length <= this.maxLeases) break;
            await raceSignal(changed, signal, conn.signal);
          } finally {
            dropWatcher(conn.client, this.#leasesPath, watcher);
          }
        }
        own = new OwnNodeWatch(conn.client, this.#leasesPath).attach(path, true); // (sent ahead of the stat read: the same round trip)
        const stat = await statOf(session, conn, path, signal);
        if (!stat || stat.ephemeralOwner.toString('hex') !== conn.sessionId) throw new NodeGoneError(path);
        // As the lock internals: a slot counted on a listing read past the local deadline (or
        // while disconnected) is not granted; queue again.
        if (session.conn() !== conn || !session.connected) throw new NodeGoneError(path);
        const held = { path, fence: longToBigInt(stat.czxid), conn, epoch: session.signal, own };
        return this.#internals.lease(this.path, held).lease;
      } catch (e) {
        own?.drop();
        if (path !== undefined) await awaitCleanup(session, deleteEventually(session, conn, path), session.connected ? CLEANUP_GRACE_MS : 0);
        if (signal.aborted) throw signal.reason;
        if (e instanceof NodeGoneError || conn.signal.aborted) continue;
        throw e;
      }
    }
  }

  /** Every lease node that exists now (holders and the one waiter), oldest first. */
  participants(): Promise<Participant[]> {
    this.#guard.throwIfClosed();
    return readParticipants(this.#session, this.#leasesPath, [LEASE_NAME]);
  }

  /** Aborts pending acquires and releases every lease this object handed out. Idempotent. */
  async close(): Promise<void> {
    if (!this.#guard.close()) return;
    await Promise.all([...this.#held].map((l) => l.release()));
  }

  /** Same as `close()`, for `await using`. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }
}

