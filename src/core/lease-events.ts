import { EventEmitter } from 'eventemitter3';
import { LeaseLostError } from './errors.js';
import { controllerOf, onLeaseEnd, type Lease } from './lease.js';

/**
 * The events of every lock and candidate, the same names on all four backends, each fired once
 * per lease and in this order: `granted`, then exactly one of `released` or `lost`. Edges only:
 * by the time a handler runs the lease may already have ended (check `lease.signal`). Handlers
 * must not throw (they run inside the recipe's own code).
 */
export interface LeaseEvents {
  /** A lease (a lock or a term) was granted to this object; fired before `acquire()`/`campaign()` resolves with it. */
  granted: (lease: Lease) => void;
  /** The lease ended because this object released it (`release()`, `resign()`, `close()`, the end of an `await using` block). */
  released: (lease: Lease) => void;
  /** The lease ended any other way: its local deadline, the store's word, its session's loss. */
  lost: (error: LeaseLostError, lease: Lease) => void;
  /**
   * A failure that no caller awaits: a background cleanup that did not reach the store, a
   * release at the end of an `await using` block. Also logged at warn. An `error` with no
   * listener is dropped (eventemitter3 does not throw).
   */
  error: (error: unknown, lease: Lease | undefined) => void;
}

/**
 * The base of every lock and candidate: it announces each lease it hands out. The recipes call
 * {@link LeaseEmitter.announce} at the one place a lease is handed to the caller, so the order of
 * the events is the lease's own (it does not depend on the backend).
 */
export class LeaseEmitter extends EventEmitter<LeaseEvents> {
  /**
   * Fires `granted` now, and `released` or `lost` when the lease's signal aborts. `quiet` is
   * asked at the end: true suppresses it (a LeaderLatch closed with `closeMode: 'silent'`).
   * @internal
   */
  protected announce<L extends Lease>(lease: L, quiet?: () => boolean): L {
    // Where the lease's controller reports failures no caller awaits (it logs them too).
    const ctl = controllerOf(lease);
    if (ctl) ctl.errorSink = (e) => this.emit('error', e, lease);
    this.emit('granted', lease);
    // (not through lease.signal: a lease whose holder never reads it need not make one)
    onLeaseEnd(lease, (reason, error) => {
      if (quiet?.()) return;
      if (reason === 'released') this.emit('released', lease);
      else {
        const e = error();
        this.emit('lost', e instanceof LeaseLostError ? e : new LeaseLostError('session-lost', `${lease.name}: lease lost`, { cause: e, fence: lease.fence }), lease);
      }
    });
    return lease;
  }
}

/**
 * The connection state of a session (a ZooKeeper session, an etcd session's lease), Curator's
 * names: CONNECTED (a new session or lease), SUSPENDED (the link dropped, the session may live),
 * RECONNECTED (the same session again), LOST (the session or lease is gone; a new one is made
 * when a recipe next needs it), READ_ONLY (ZooKeeper only).
 */
export type SessionState = 'CONNECTED' | 'SUSPENDED' | 'RECONNECTED' | 'LOST' | 'READ_ONLY';

/**
 * The events of every session, the same names on etcd and ZooKeeper (Redis and Postgres recipes
 * take your client or pool and have no session of their own). Each edge fires `state` and the
 * event named after the state. By the time a handler runs, the signals of the leases held under
 * a LOST session (and, under ZooKeeper's standard policy, a SUSPENDED one) have already aborted.
 * Handlers must not throw. etcd's lease has no "link down but alive" edge a holder could act on
 * (it lives until its local deadline whatever the link does), so an etcd session fires CONNECTED
 * and LOST only.
 */
export interface SessionEvents {
  /** Every connection-state edge, in order. */
  state: (state: SessionState) => void;
  /** The first connection of a (new) session; on etcd, a lease granted. */
  CONNECTED: () => void;
  /** The connection dropped; the session may still be alive (ZooKeeper). */
  SUSPENDED: () => void;
  /** Connected again to the same session (ZooKeeper). */
  RECONNECTED: () => void;
  /** The session expired, its lease was lost, or its local deadline passed; a new one is made when needed. */
  LOST: () => void;
  /** Connected to a read-only server (node-zookeeper-client 1.1.3 never asks for one). */
  READ_ONLY: () => void;
}

/** The base of every session: it fires each connection-state edge the one way. */
export class SessionEmitter extends EventEmitter<SessionEvents> {
  /** Fires `state`, then the event named after the state. @internal */
  protected edge(state: SessionState): void {
    this.emit('state', state);
    this.emit(state);
  }
}
