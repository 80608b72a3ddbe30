import { SessionEmitter } from '../../core/lease-events.js';
import type { Etcd3 } from 'etcd3';
import { raceSignal, waitScope } from '../../core/abort.js';
import { leaseTiming } from '../../core/deadline.js';
import { BusyError, ClosedError, ConfigError, LeaseLostError, SessionExpiredError, type TenureError } from '../../core/errors.js';
import { optionalClock, optionalLogger, WAIT_KEYS, type Logger, type WaitOptions } from '../../core/options.js';
import type { Clock } from '../../core/clock.js';
import { optionalNumber, requireOptions } from '../../core/validate.js';
import { callWithin, endpointOf, newEtcdClient } from './client.js';
import { LeaseEpoch } from './epoch.js';
import { plaintextToTls, toTenureError } from './errors.js';
import { loadEtcd3 } from './peer.js';

/** Options of {@link EtcdSession.create}. */
export interface EtcdSessionOptions {
  /**
   * An etcd3 client to use (not closed by the session). Give this or `hosts`. Prefer one made
   * with {@link createEtcdClient}: etcd3's default per-host circuit breaker blocks keepalives
   * for 5 s after 3 failed calls, which turns a 1 s network blip into a lost lease.
   */
  client?: Etcd3;
  /** Endpoints for a client the session creates with {@link createEtcdClient} and closes. */
  hosts?: string | string[];
  /** Lease TTL in ms, a whole number of seconds (etcd's unit). @default 10000 */
  ttlMs?: number;
  /**
   * How long before the server could expire the lease the local deadline fires: the deadline is
   * `send time of the last acknowledged keepalive + TTL − safetyMarginMs`. Keepalives go out every
   * TTL/3. Must be > 0 and < 2/3 of the TTL. @default ttlMs / 5
   */
  safetyMarginMs?: number;
  /** Resume this existing lease (decimal string or bigint) instead of granting one. */
  leaseId?: string | bigint;
  /**
   * Bound on every call to etcd in ms: the grant, resume and revoke calls, and how long a
   * recipe's calls keep retrying transport errors before they reject with StoreUnavailableError.
   * @default 5000
   */
  callTimeoutMs?: number;
  /** @default the monotonic clock */
  clock?: Clock;
  /** @default silent */
  logger?: Logger;
}

/**
 * The one owner of liveness for etcd recipes: an etcd lease kept alive every TTL/3, and a
 * **local deadline** on the monotonic clock — the send time of the last acknowledged keepalive
 * plus the TTL minus a safety margin. The server cannot expire the lease before that instant
 * (it refreshes the TTL on receipt, after the send), so when the deadline fires — also when
 * nothing answers at all — `signal` aborts before anyone else can be granted what this
 * session's keys held.
 *
 * `signal` aborts with a {@link LeaseLostError}: reason `deadline` (no acknowledged keepalive
 * in time), `expired` (etcd says the lease is gone), or `closed` (`close()` / `orphan()`). After a
 * loss the session is not dead: the next campaign or acquire grants a new lease on the same client
 * (a new `leaseId`, a new `signal`), so recipes built on it carry on. Only `close()` and
 * `orphan()` are final.
 */
export class EtcdSession extends SessionEmitter implements AsyncDisposable {
  /** The etcd3 client the recipes use. */
  readonly client: Etcd3;
  /** The lease TTL in ms. */
  readonly ttlMs: number;
  /** How long before the server could expire the lease the local deadline fires, in ms. */
  readonly safetyMarginMs: number;
  /** The monotonic clock its deadlines are measured on. */
  readonly clock: Clock;
  /** The session's logger. */
  readonly logger: Logger;
  /** Bound on every call to etcd (see {@link EtcdSessionOptions.callTimeoutMs}). */
  readonly callTimeoutMs: number;
  readonly #ownsClient: boolean;
  #epoch!: LeaseEpoch;
  #granting: Promise<LeaseEpoch> | undefined;
  readonly #final = new AbortController();
  readonly #keys = new Map<string, object>();
  #closed: Promise<void> | undefined;
  #clientClosed = false;

  /**
   * Grants (or resumes) the lease and starts keeping it alive. `wait` bounds it like every wait:
   * `signal` rejects with its reason, `timeoutMs` with an AcquireTimeoutError (each call is also
   * bounded by `callTimeoutMs`); a lease granted after the caller gave up is revoked.
   */
  static async create(options: EtcdSessionOptions, wait: WaitOptions = {}): Promise<EtcdSession> {
    const w = requireOptions('wait', wait, WAIT_KEYS);
    const scope = waitScope('etcd session create', w); // validates signal and timeoutMs before any I/O
    try {
      await raceSignal(loadEtcd3(), scope.signal);
      const session = new EtcdSession(options);
      const granting = session.#grant(options.leaseId);
      try {
        session.#install(await raceSignal(granting, scope.signal));
      } catch (e) {
        if (scope.signal.aborted && options.leaseId === undefined) {
          // The grant may still land: revoke it, then close the client (a resumed lease is the caller's to keep).
          void granting
            .then((epoch) => {
              epoch.lose('closed', 'etcd session: create given up');
              return session.client.leaseClient.leaseRevoke({ ID: epoch.leaseId }, callWithin(session.callTimeoutMs));
            })
            .catch(() => undefined)
            .finally(() => session.#closeClient());
        } else {
          session.#closeClient();
        }
        throw e;
      }
      return session;
    } finally {
      scope.dispose();
    }
  }

  private constructor(options: EtcdSessionOptions) {
    super();
    const o = requireOptions('options', options, { client: true, hosts: true, ttlMs: true, safetyMarginMs: true, leaseId: true, callTimeoutMs: true, clock: true, logger: true });
    if ((o.client === undefined) === (o.hosts === undefined)) throw new ConfigError('client', 'give exactly one of client or hosts');
    const timing = leaseTiming(o, { minTtlMs: 1000, maxTtlMs: 86_400_000, ttlUnitMs: 1000 });
    this.ttlMs = timing.ttlMs;
    this.safetyMarginMs = timing.safetyMarginMs;
    if (o.leaseId !== undefined && !/^[1-9][0-9]{0,18}$/.test(String(o.leaseId))) throw new ConfigError('leaseId', `must be a positive integer, got ${String(o.leaseId)}`);
    this.callTimeoutMs = optionalNumber('callTimeoutMs', o.callTimeoutMs, 5000, { integer: true, min: 1, max: 2 ** 31 - 1 });
    this.clock = optionalClock(o.clock);
    this.logger = optionalLogger(o.logger, { component: 'etcd-session' });
    this.#ownsClient = o.client === undefined;
    this.client = o.client ?? newEtcdClient({ hosts: o.hosts! });
  }

  /** Makes `epoch` the current lease: CONNECTED now, LOST when it is lost (not at close). */
  #install(epoch: LeaseEpoch): void {
    this.#epoch = epoch;
    this.edge('CONNECTED');
    const lost = (): void => {
      if (!this.#final.signal.aborted && this.#epoch === epoch) this.edge('LOST');
    };
    if (epoch.signal.aborted) lost();
    else epoch.signal.addEventListener('abort', lost, { once: true });
  }

  /** The endpoints the client talks to, for error messages. */
  get endpoint(): string | undefined {
    return endpointOf(this.client);
  }

  /** The current lease id as a decimal string (what etcd's JSON and etcdctl show). */
  get leaseId(): string {
    return this.#epoch.leaseId;
  }

  /** The current lease id in lower-case hex, the form etcd's concurrency keys use. */
  get leaseIdHex(): string {
    return this.#epoch.leaseIdHex;
  }

  /** Aborts when the current lease is lost, may be lost, or the session ends. Read it again after a loss. */
  get signal(): AbortSignal {
    return this.#epoch.signal;
  }

  /** The current lease's local deadline in the clock's milliseconds; moves forward with each acknowledged keepalive. */
  get deadline(): number {
    return this.#epoch.deadline;
  }

  /** Keepalives acknowledged for the current lease. */
  get keepAlivesAcked(): number {
    return this.#epoch.acked;
  }

  /** True once the current lease is lost (signal aborted or local deadline passed, checked synchronously). */
  get lost(): boolean {
    return this.#epoch.lost;
  }

  /** True once `close()` or `orphan()` was called. */
  get closed(): boolean {
    return this.#final.signal.aborted;
  }

  /** Milliseconds left before the current lease's local deadline (0 once lost). */
  remainingMs(): number {
    return this.#epoch.remainingMs();
  }

  /** Throws ClosedError after close, SessionExpiredError when the current lease is lost. */
  throwIfLost(what = 'session'): void {
    if (this.#final.signal.aborted) throw new ClosedError(`${what}: session`);
    if (this.lost) throw this.expiredError(what);
  }

  /**
   * @internal The live lease, granting a new one (once, however many recipes ask) when the last
   * was lost. Rejects with ClosedError after close.
   */
  async live(signal: AbortSignal, what: string): Promise<LeaseEpoch> {
    signal.throwIfAborted();
    if (this.#final.signal.aborted) throw new ClosedError(`${what}: session`);
    if (!this.#epoch.lost) return this.#epoch;
    this.#granting ??= this.#grant(undefined).then(
      (epoch) => {
        this.#granting = undefined;
        if (this.#final.signal.aborted) {
          epoch.lose('closed', 'session closed');
          this.client.leaseClient.leaseRevoke({ ID: epoch.leaseId }, callWithin(this.callTimeoutMs)).catch(() => undefined);
        } else {
          this.#install(epoch);
        }
        return epoch;
      },
      (e: unknown) => {
        this.#granting = undefined;
        throw e;
      },
    );
    const epoch = await raceSignal(this.#granting, signal);
    if (this.#final.signal.aborted) throw new ClosedError(`${what}: session`);
    return epoch;
  }

  /** @internal the error recipes reject with when the session is gone. */
  expiredError(what: string, epoch: LeaseEpoch = this.#epoch): TenureError {
    if (this.#final.signal.aborted) return new ClosedError(`${what}: session`);
    const reason: unknown = epoch.signal.reason;
    return new SessionExpiredError(`${what}: session lease ${epoch.leaseId} lost (${reason instanceof LeaseLostError ? reason.reason : 'unknown'})`, { cause: reason });
  }

  /** @internal one queue key per session lease and name: recipes claim it while they use it. */
  claimKey(key: string, what: string): object {
    if (this.#keys.has(key)) throw new BusyError(`${what}: this session already waits for or holds it (one key per session and name; use another session)`);
    const token = {};
    this.#keys.set(key, token);
    return token;
  }

  /** @internal frees a key claimed with `token` (no-op when it was claimed again since). */
  freeKey(key: string, token: object): void {
    if (this.#keys.get(key) === token) this.#keys.delete(key);
  }

  /** Ends the session and revokes the lease, deleting every key attached to it. Idempotent. */
  close(): Promise<void> {
    this.#closed ??= (async () => {
      this.#final.abort();
      const epoch = this.#epoch;
      const revoke = epoch !== undefined && !epoch.lost;
      epoch?.lose('closed', 'session closed');
      if (revoke) {
        try {
          await this.client.leaseClient.leaseRevoke({ ID: epoch.leaseId }, callWithin(this.callTimeoutMs));
        } catch (e) {
          this.logger.debug({ err: e, leaseId: epoch.leaseId }, 'etcd session: revoke failed (the lease will expire by its TTL)');
        }
      }
      this.#closeClient();
    })();
    return this.#closed;
  }

  /**
   * Stops refreshing without revoking: the lease and its keys live until the TTL runs out, and
   * another process may resume it with `leaseId`. `signal` aborts (reason `closed`). Final.
   */
  orphan(): void {
    this.#final.abort();
    this.#epoch.lose('closed', 'session orphaned');
    this.#closed ??= Promise.resolve();
    this.#closeClient();
  }

  /** Same as `close()`, for `await using`. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  async #grant(resume: string | bigint | undefined): Promise<LeaseEpoch> {
    try {
      return await this.#grantOnce(resume);
    } catch (e) {
      throw await plaintextToTls(toTenureError(e, resume === undefined ? 'etcd session: lease grant' : 'etcd session: lease resume', this.endpoint), this.endpoint);
    }
  }

  async #grantOnce(resume: string | bigint | undefined): Promise<LeaseEpoch> {
    const sent = this.clock.now();
    const init = { client: this.client, ttlMs: this.ttlMs, safetyMarginMs: this.safetyMarginMs, clock: this.clock, logger: this.logger };
    let id: string;
    let ttlSeconds: number;
    if (resume === undefined) {
      const res = await this.client.leaseClient.leaseGrant({ TTL: this.ttlMs / 1000, ID: 0 }, callWithin(this.callTimeoutMs));
      id = String(res.ID);
      ttlSeconds = Number(res.TTL);
    } else {
      id = String(resume);
      const res = await this.client.leaseClient.leaseTimeToLive({ ID: id }, callWithin(this.callTimeoutMs));
      ttlSeconds = Number(res.TTL);
      if (!(ttlSeconds > 0)) throw new SessionExpiredError(`etcd session: lease ${id} to resume does not exist`);
    }
    this.logger.info({ leaseId: id, ttlMs: this.ttlMs, resumed: resume !== undefined }, 'etcd session lease granted');
    return new LeaseEpoch(init, id, sent, ttlSeconds * 1000);
  }

  #closeClient(): void {
    if (this.#ownsClient && !this.#clientClosed) {
      this.#clientClosed = true;
      this.client.close();
    }
  }
}
