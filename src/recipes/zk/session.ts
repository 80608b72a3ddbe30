import type { Client, State as ClientState } from 'node-zookeeper-client';
import type { Clock } from '../../core/clock.js';
import { leaseTiming } from '../../core/deadline.js';
import { AcquireTimeoutError, ClosedError, LeaseLostError, SessionExpiredError, StoreUnavailableError, type LeaseLostReason } from '../../core/errors.js';
import { raceSignal, waitScope } from '../../core/abort.js';
import { optionalClock, optionalLogger, WAIT_KEYS, type Logger, type WaitOptions } from '../../core/options.js';
import { optionalEnum, optionalNumber, requireOptions } from '../../core/validate.js';
import { Liveness } from './liveness.js';
import { requireConnectionString, type ZkConnectionState, type ZkErrorPolicy, type ZkSessionOptions } from './session-options.js';
import { SessionEmitter } from '../../core/lease-events.js';

export type { ZkConnectionState, ZkErrorPolicy, ZkSessionEvents, ZkSessionOptions } from './session-options.js';
import { dropSocket, killClient, zkExists } from './ops.js';
import { loadZookeeper, zookeeper } from './peer.js';
import { validateAcl, validateAuthInfo, type ClientAcl, type ZkAuthInfo } from './acl.js';

/** @internal one ZooKeeper session (one client) as the recipes see it. */
export interface ZkConn {
  readonly client: Client;
  /** Hex of the 8-byte session id. */
  readonly sessionId: string;
  /** Aborts when this ZooKeeper session ends (LOST or close): its ephemeral nodes are (or will be) gone. */
  readonly signal: AbortSignal;
}

type LiveConn = ZkConn & { abort: AbortController; connectedOnce: boolean; sessionId: string };

/**
 * One ZooKeeper client and the one owner of liveness for every recipe built on it: it reports
 * connection-state edges, keeps `lastServerContact` with its own heartbeat, and exposes `signal`,
 * the per-connection-epoch signal every lease derives from. After LOST it makes a new session by
 * itself, and recipes re-join on it.
 */
export class ZkSession extends SessionEmitter implements AsyncDisposable {
  /** The connection string it was created with. */
  readonly connectionString: string;
  /** How SUSPENDED is treated: `standard` (as lost) or `session` (lead until the local deadline). */
  readonly policy: ZkErrorPolicy;
  /** The session's logger. */
  readonly logger: Logger;
  /** The monotonic clock its deadlines are measured on. */
  readonly clock: Clock;
  readonly #requestedTimeout: number;
  readonly #connectTimeout: number;
  readonly #spinDelay: number;
  readonly #authInfo: ZkAuthInfo[];
  /** @internal the ACL recipes create their nodes with (undefined: open). */
  readonly acl: ClientAcl[] | undefined;
  #conn: LiveConn | undefined;
  #epoch = new AbortController();
  #state: ZkConnectionState | 'LATENT' | 'CLOSED' = 'LATENT';
  #connected = false;
  readonly #liveness: Liveness;
  #closed = new AbortController();
  #watchEvents = 0;

  /**
   * Connects and resolves once the first ZooKeeper session is established. `wait` bounds it like
   * every wait: `signal` rejects with its reason, `timeoutMs` with an AcquireTimeoutError; without
   * `timeoutMs`, a session that cannot connect within `connectTimeoutMs` rejects with a
   * StoreUnavailableError. Either way it leaves nothing behind: no client, no timer, no reconnect loop.
   */
  static async create(options: ZkSessionOptions, wait: WaitOptions = {}): Promise<ZkSession> {
    const w = requireOptions('wait', wait, WAIT_KEYS);
    waitScope('zk session create', w).dispose(); // validates signal and timeoutMs before any I/O
    await loadZookeeper();
    const session = new ZkSession(options);
    try {
      session.#newClient();
      await session.whenConnected({ signal: w.signal, timeoutMs: w.timeoutMs });
    } catch (e) {
      await session.close();
      throw e;
    }
    return session;
  }

  private constructor(options: ZkSessionOptions) {
    super();
    const o = requireOptions('options', options, { connectionString: true, ttlMs: true, policy: true, safetyMarginMs: true, connectTimeoutMs: true, callTimeoutMs: true, spinDelayMs: true, logger: true, clock: true, authInfo: true, acl: true });
    this.connectionString = requireConnectionString(o.connectionString);
    const timing = leaseTiming(o, { minTtlMs: 1, maxTtlMs: 2 ** 31 - 1 });
    this.#requestedTimeout = timing.ttlMs;
    this.policy = optionalEnum('policy', o.policy, ['standard', 'session'] as const, 'standard');
    this.#connectTimeout = optionalNumber('connectTimeoutMs', o.connectTimeoutMs, 15_000, { integer: true, min: 1, max: 2 ** 31 - 1 });
    this.#spinDelay = optionalNumber('spinDelayMs', o.spinDelayMs, 100, { integer: true, min: 0, max: 60_000 });
    this.#authInfo = validateAuthInfo(o.authInfo);
    this.acl = validateAcl(o.acl);
    this.logger = optionalLogger(o.logger, { component: 'zk-session' });
    if (this.#authInfo.length > 0 && this.acl === undefined) {
      this.logger.warn({ schemes: this.#authInfo.map((a) => a.scheme) }, 'zk session: authInfo without acl: the nodes tenure creates are open to everyone (world:anyone) unless a recipe gives its own acl');
    }
    this.clock = optionalClock(o.clock);
    const callTimeout = optionalNumber('callTimeoutMs', o.callTimeoutMs, 5000, { integer: true, min: 1, max: 2 ** 31 - 1 });
    this.#liveness = new Liveness(this.clock, timing.safetyMarginMs, this.#requestedTimeout, callTimeout);
    this.#epoch.abort(new LeaseLostError('suspended', 'zk session: not connected yet'));
  }

  /** The current connection state (`'LATENT'` before the first connection, `'CLOSED'` after `close()`). */
  get state(): ZkConnectionState | 'LATENT' | 'CLOSED' {
    return this.#state;
  }

  /** True once `close()` was called. */
  get closed(): boolean {
    return this.#closed.signal.aborted;
  }

  /**
   * True while connected, the current epoch is live and its local deadline has not passed. The
   * deadline is checked now, on the clock, not left to its timer: a process resumed after a pause
   * reads its socket before its timers run, and a reply read then may show a queue the server
   * has changed since (our session expired, a successor granted). A deadline found passed here
   * ends the session at once, as its timer would have.
   */
  get connected(): boolean {
    return this.#connected && !this.#epoch.signal.aborted && !this.#liveness.expired();
  }

  /**
   * The current connection epoch's signal: aborts (reason a LeaseLostError) on SUSPENDED under
   * the `standard` policy, on LOST, on the local deadline, and on close. Leases granted now derive
   * from it; read it again after a reconnect for the new epoch.
   */
  get signal(): AbortSignal {
    return this.#epoch.signal;
  }

  /** The session timeout (TTL) the server granted (the requested one before connecting). */
  get ttlMs(): number {
    return this.#liveness.timeout;
  }

  /** How long one request waits for the server's reply before the link is treated as silent (`callTimeoutMs`). */
  get callTimeoutMs(): number {
    return this.#liveness.callTimeout;
  }

  /** The local deadline on the session's clock: `lastServerContact + sessionTimeout − safetyMargin`. */
  deadline(): number {
    return this.#liveness.deadline();
  }

  /** Monotonic time (ms) at which the last request the server answered was sent. */
  get lastServerContact(): number {
    return this.#liveness.lastContact;
  }

  /** Hex id of the current ZooKeeper session (undefined before the first connect). */
  get sessionId(): string | undefined {
    return this.#conn?.connectedOnce ? this.#conn.sessionId : undefined;
  }

  /** How many watch notifications recipes on this session received (one per wake-up). */
  get watchEvents(): number {
    return this.#watchEvents;
  }

  /** @internal counts a recipe wake-up. */
  countWatchEvent(): void {
    this.#watchEvents++;
  }

  /** @internal the current ZooKeeper session. Throws ClosedError after close. */
  conn(): ZkConn {
    this.#throwIfClosed();
    if (!this.#conn) throw new SessionExpiredError('zk session: not started');
    return this.#conn;
  }

  /** The raw client of the current session (it changes after LOST). */
  get client(): Client {
    return this.conn().client;
  }

  /** Resolves when connected with a live epoch (at once if already); rejects on close/abort/timeout. */
  async whenConnected(options: WaitOptions = {}): Promise<void> {
    requireOptions('options', options, WAIT_KEYS);
    this.#throwIfClosed();
    if (this.connected) return;
    // A wait without a timeout of its own is bounded by connectTimeoutMs, then rejects with a
    // StoreUnavailableError naming the ensemble (ZooKeeper down, not blinking).
    const bound = options.timeoutMs ?? this.#connectTimeout;
    const scope = waitScope('zk session connect', { signal: options.signal, timeoutMs: bound });
    let onState!: () => void;
    const connected = new Promise<void>((resolve) => {
      onState = () => {
        if (this.connected) resolve();
      };
      this.on('state', onState);
    });
    try {
      // (raceSignal hears the session's one closed signal through one listener however many wait;
      // close() aborts it with a ClosedError)
      await raceSignal(connected, this.#closed.signal, scope.signal);
    } catch (e) {
      if (options.timeoutMs === undefined && e instanceof AcquireTimeoutError) {
        throw new StoreUnavailableError('zookeeper', this.connectionString, `not connected within ${bound} ms`, { cause: e });
      }
      throw e;
    } finally {
      this.off('state', onState);
      scope.dispose();
    }
  }

  /**
   * @internal Arms the bound of one request sent now (see Liveness.watchRequest): unanswered for
   * `callTimeoutMs` while connected, the session drops the silent link and `onTimeout` runs.
   * Returns the disarm function.
   */
  armCallTimeout(failFast: boolean, onTimeout: () => void): () => void {
    return this.#liveness.watchRequest(failFast, onTimeout);
  }

  /** @internal True when a silent link was dropped at or after `since` (on the session's clock). */
  droppedSilentSince(since: number): boolean {
    return this.#liveness.droppedSilentAt >= since;
  }

  /** Closes the client (its ephemeral nodes go at once), aborts every lease. Idempotent. */
  async close(): Promise<void> {
    if (this.#closed.signal.aborted) return;
    this.#closed.abort(new ClosedError('zk session'));
    this.#liveness.stop();
    this.#endEpoch('closed', 'zk session closed');
    this.#state = 'CLOSED';
    const conn = this.#conn;
    if (conn) {
      conn.abort.abort(new ClosedError('zk session'));
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, 1000);
        conn.client.once('disconnected', () => {
          clearTimeout(t);
          resolve();
        });
        conn.client.close();
        if (!this.#connected) resolve();
      });
      // The client closes its socket when the server answers the close; a silent server never
      // does, and a close that raced a reconnect keeps reconnecting (see killClient).
      killClient(conn.client);
    }
    this.#connected = false;
  }

  /** Same as `close()`, for `await using`. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  #throwIfClosed(): void {
    if (this.#closed.signal.aborted) throw new ClosedError('zk session');
  }

  #newClient(): void {
    const client = zookeeper.createClient(this.connectionString, {
      sessionTimeout: this.#requestedTimeout,
      spinDelay: this.#spinDelay,
      retries: 0,
    });
    const abort = new AbortController();
    const conn: LiveConn = { client, abort, connectedOnce: false, sessionId: '', signal: abort.signal };
    this.#conn = conn;
    client.on('state', (s) => this.#onClientState(conn, s));
    // Sent on every (re)connection of this client, before any request.
    for (const a of this.#authInfo) client.addAuthInfo(a.scheme, Buffer.from(a.auth));
    client.connect();
  }

  #onClientState(conn: LiveConn, s: ClientState): void {
    if (conn !== this.#conn || this.#closed.signal.aborted) return;
    if (s === zookeeper.State.SYNC_CONNECTED || s === zookeeper.State.CONNECTED_READ_ONLY) {
      this.#connected = true;
      const first = !conn.connectedOnce;
      conn.connectedOnce = true;
      conn.sessionId = conn.client.getSessionId().toString('hex');
      if (s === zookeeper.State.CONNECTED_READ_ONLY) {
        this.#endEpoch('suspended', 'zk session: read-only');
        this.#emit('READ_ONLY');
        return;
      }
      if (this.#epoch.signal.aborted) this.#epoch = new AbortController();
      this.#liveness.start(conn.client.getSessionTimeout(), {
        ping: () => zkExists(conn.client, '/'),
        connected: () => this.#connected && conn === this.#conn,
        // The link is silent: close the socket so the client reconnects — to another member, if
        // any — instead of queueing more on it.
        onSilent: (silentMs, noticedBy) => {
          if (!dropSocket(conn.client)) return;
          this.logger.info({ silentMs: Math.round(silentMs), noticedBy, callTimeoutMs: this.callTimeoutMs }, 'zk server silent: dropping the connection');
        },
        onDeadline: (lateMs) => {
          if (conn !== this.#conn || this.#closed.signal.aborted) return;
          this.logger.info({ lateMs: Math.round(lateMs) }, 'zk local session deadline passed');
          this.#endEpoch('deadline', 'zk session: local deadline passed (server silent too long)');
          this.#lose('local deadline passed without server contact');
        },
      });
      this.#emit(first ? 'CONNECTED' : 'RECONNECTED');
    } else if (s === zookeeper.State.DISCONNECTED) {
      if (!this.#connected) return;
      this.#connected = false;
      if (this.policy === 'standard') this.#endEpoch('suspended', 'zk session suspended (connection lost)');
      this.#emit('SUSPENDED');
    } else if (s === zookeeper.State.EXPIRED || s === zookeeper.State.AUTH_FAILED) {
      this.#lose(s === zookeeper.State.EXPIRED ? 'session expired' : 'authentication failed');
    }
  }

  #emit(state: ZkConnectionState): void {
    this.#state = state;
    this.logger.info({ state, sessionId: this.#conn?.sessionId }, 'zk connection state');
    this.edge(state);
  }

  #endEpoch(reason: LeaseLostReason, message: string): void {
    if (!this.#epoch.signal.aborted) this.#epoch.abort(new LeaseLostError(reason, message));
  }

  /** The session is gone (or must be assumed gone): end it and start a new one. */
  #lose(why: string): void {
    const conn = this.#conn;
    if (!conn || this.#closed.signal.aborted) return;
    this.#liveness.stop();
    this.#connected = false;
    this.#endEpoch('session-lost', `zk session lost: ${why}`);
    conn.abort.abort(new SessionExpiredError(`zk session ${conn.sessionId} lost: ${why}`));
    this.#emit('LOST');
    try {
      conn.client.close();
    } catch {
      // already closed
    }
    killClient(conn.client);
    if (!this.#closed.signal.aborted) this.#newClient();
  }
}
