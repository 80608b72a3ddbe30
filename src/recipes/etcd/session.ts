import type { Etcd3 } from 'etcd3';
import { pino, type Logger } from 'pino';
import { monotonicClock, type Clock } from '../../core/clock.js';
import { ClosedError, ConfigError, LeaseLostError, SessionExpiredError, TenureError, type LeaseLostReason } from '../../core/errors.js';
import { optionalNumber, requireOptions } from '../../core/validate.js';
import { callWithin, createEtcdClient, mapEtcdError } from './client.js';
import { KeepAliveLoop } from './keepalive.js';

export interface EtcdSessionOptions {
  /**
   * An etcd3 client to use (not closed by the session). Give this or `hosts`. Prefer one made
   * with {@link createEtcdClient}: etcd3's default per-host circuit breaker blocks keepalives
   * for 5 s after 3 failed calls, which turns a 1 s network blip into a lost lease.
   */
  client?: Etcd3;
  /** Endpoints for a client the session creates with {@link createEtcdClient} and closes. */
  hosts?: string | string[];
  /** Lease TTL in whole seconds (etcd's unit). @default 10 */
  ttlSeconds?: number;
  /**
   * How long before the server could expire the lease the local deadline fires, in ms: the
   * deadline is `send time of the last acknowledged keepalive + TTL − safetyMarginMs`.
   * Must be > 0 and < TTL. @default min(TTL/4, 2000 ms)
   */
  safetyMarginMs?: number;
  /** Keepalive period in ms; must leave room for a retry before the deadline. @default TTL/3 */
  keepAliveIntervalMs?: number;
  /** Resume this existing lease (decimal string or bigint) instead of granting one. */
  leaseId?: string | bigint;
  /** Deadline for the grant, resume and revoke calls in ms. @default 5000 */
  callTimeoutMs?: number;
  /** @default monotonicClock */
  clock?: Clock;
  /** @default a silent pino logger */
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
 * in time), `expired` (etcd says the lease is gone), or `closed` (`close()` / `orphan()`).
 */
export class EtcdSession implements AsyncDisposable {
  /** The etcd3 client the recipes use. */
  readonly client: Etcd3;
  readonly ttlSeconds: number;
  readonly safetyMarginMs: number;
  readonly keepAliveIntervalMs: number;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly #ownsClient: boolean;
  readonly #callTimeoutMs: number;
  readonly #abort = new AbortController();
  #leaseId = '0';
  #deadline = 0;
  #acked = 0;
  #keepAlive: KeepAliveLoop | undefined;
  #deadlineTimer: NodeJS.Timeout | undefined;
  readonly #keys = new Map<string, object>();
  #orphaned = false;
  #closed: Promise<void> | undefined;
  #clientClosed = false;

  /** Grants (or resumes) the lease and starts keeping it alive. */
  static async create(options: EtcdSessionOptions): Promise<EtcdSession> {
    const session = new EtcdSession(options);
    try {
      await session.#begin(requireOptions('options', options).leaseId);
    } catch (e) {
      session.#shutdown();
      throw mapEtcdError(e);
    }
    return session;
  }

  private constructor(options: EtcdSessionOptions) {
    const o = requireOptions('options', options);
    if ((o.client === undefined) === (o.hosts === undefined)) throw new ConfigError('client', 'give exactly one of client or hosts');
    this.ttlSeconds = optionalNumber('ttlSeconds', o.ttlSeconds, 10, { integer: true, min: 1, max: 86_400 });
    const ttlMs = this.ttlSeconds * 1000;
    this.safetyMarginMs = optionalNumber('safetyMarginMs', o.safetyMarginMs, Math.min(ttlMs / 4, 2000), { min: 0, exclusiveMin: true });
    if (this.safetyMarginMs >= ttlMs) throw new ConfigError('safetyMarginMs', `must be less than the TTL (${ttlMs} ms), got ${this.safetyMarginMs}`);
    this.keepAliveIntervalMs = optionalNumber('keepAliveIntervalMs', o.keepAliveIntervalMs, ttlMs / 3, { min: 10 });
    if (this.keepAliveIntervalMs >= ttlMs - this.safetyMarginMs) {
      throw new ConfigError('keepAliveIntervalMs', `must be less than TTL − safetyMarginMs (${ttlMs - this.safetyMarginMs} ms), got ${this.keepAliveIntervalMs}`);
    }
    if (o.leaseId !== undefined && !/^[1-9][0-9]*$/.test(String(o.leaseId))) throw new ConfigError('leaseId', `must be a positive integer, got ${String(o.leaseId)}`);
    this.#callTimeoutMs = optionalNumber('callTimeoutMs', o.callTimeoutMs, 5000, { min: 1 });
    this.clock = o.clock ?? monotonicClock;
    this.logger = o.logger ?? pino({ level: 'silent' });
    this.#ownsClient = o.client === undefined;
    this.client = o.client ?? createEtcdClient({ hosts: o.hosts! });
  }

  /** The lease id as a decimal string (what etcd's JSON and etcdctl show). */
  get leaseId(): string {
    return this.#leaseId;
  }

  /** The lease id in lower-case hex, the form etcd's concurrency keys use. */
  get leaseIdHex(): string {
    return BigInt(this.#leaseId).toString(16);
  }

  /** Aborts when the lease is lost, may be lost, or the session ends. */
  get signal(): AbortSignal {
    return this.#abort.signal;
  }

  /** The local deadline in the clock's milliseconds; moves forward with each acknowledged keepalive. */
  get deadline(): number {
    return this.#deadline;
  }

  /** Keepalives acknowledged so far. */
  get keepAlivesAcked(): number {
    return this.#acked;
  }

  /** True once `signal` aborted or the local deadline passed (checked synchronously). */
  get lost(): boolean {
    if (!this.#abort.signal.aborted && this.clock.now() >= this.#deadline) this.#lose('deadline');
    return this.#abort.signal.aborted;
  }

  /** Milliseconds left before the local deadline (0 once lost). */
  remainingMs(): number {
    return this.lost ? 0 : Math.max(0, this.#deadline - this.clock.now());
  }

  /** Throws the abort reason ({@link SessionExpiredError} wrapping it) when the session is lost. */
  throwIfLost(what = 'session'): void {
    if (this.lost) throw this.expiredError(what);
  }

  /** @internal the error recipes reject with when the session is gone. */
  expiredError(what: string): TenureError {
    const reason: unknown = this.#abort.signal.reason;
    if (reason instanceof LeaseLostError && reason.reason === 'closed') return new ClosedError(`${what}: session`);
    return new SessionExpiredError(`${what}: session lease ${this.#leaseId} lost (${reason instanceof LeaseLostError ? reason.reason : 'unknown'})`, { cause: reason });
  }

  /** @internal one queue key per session and name: recipes claim it while they use it. */
  claimKey(key: string, what: string): object {
    if (this.#keys.has(key)) throw new TenureError(`${what}: this session already waits for or holds it (one key per session and name; use another session)`);
    const token = {};
    this.#keys.set(key, token);
    return token;
  }

  /** @internal frees a key claimed with `token` (no-op when it was claimed again since). */
  freeKey(key: string, token: object): void {
    if (this.#keys.get(key) === token) this.#keys.delete(key);
  }

  /** Ends the session and revokes the lease, deleting every key attached to it. Idempotent. */
  async close(): Promise<void> {
    if (this.#closed) return this.#closed;
    this.#closed = (async () => {
      const revoke = !this.#orphaned && this.#leaseId !== '0';
      this.#lose('closed', 'session closed');
      if (revoke) {
        try {
          await this.client.leaseClient.leaseRevoke({ ID: this.#leaseId }, callWithin(this.#callTimeoutMs));
        } catch (e) {
          this.logger.debug({ err: e, leaseId: this.#leaseId }, 'etcd session: revoke failed (the lease will expire by its TTL)');
        }
      }
      this.#shutdown();
    })();
    return this.#closed;
  }

  /**
   * Stops refreshing without revoking: the lease and its keys live until the TTL runs out, and
   * another process may resume it with `leaseId`. `signal` aborts (reason `closed`).
   */
  orphan(): void {
    this.#orphaned = true;
    this.#lose('closed', 'session orphaned');
    this.#shutdown();
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  async #begin(resume: string | bigint | undefined): Promise<void> {
    const sent = this.clock.now();
    if (resume === undefined) {
      const res = await this.client.leaseClient.leaseGrant({ TTL: this.ttlSeconds, ID: 0 }, callWithin(this.#callTimeoutMs));
      this.#leaseId = String(res.ID);
      this.#deadline = sent + Number(res.TTL) * 1000 - this.safetyMarginMs;
    } else {
      this.#leaseId = String(resume);
      const res = await this.client.leaseClient.leaseTimeToLive({ ID: this.#leaseId }, callWithin(this.#callTimeoutMs));
      if (!(Number(res.TTL) > 0)) throw new SessionExpiredError(`etcd session: lease ${this.#leaseId} to resume does not exist`);
      this.#deadline = sent + Number(res.TTL) * 1000 - this.safetyMarginMs;
    }
    this.logger.info({ leaseId: this.#leaseId, ttlSeconds: this.ttlSeconds, resumed: resume !== undefined }, 'etcd session started');
    this.#armDeadline();
    if (this.#abort.signal.aborted) return;
    this.#keepAlive = new KeepAliveLoop(this.client, this.#leaseId, this.keepAliveIntervalMs, this.clock, this.logger, (sent, ttl) => this.#onAck(sent, ttl));
  }

  #onAck(sent: number, ttl: number): void {
    if (this.#abort.signal.aborted) return;
    if (!(ttl > 0)) {
      this.#lose('expired', `etcd session: lease ${this.#leaseId} expired or was revoked`);
      return;
    }
    this.#acked++;
    this.#deadline = Math.max(this.#deadline, sent + ttl * 1000 - this.safetyMarginMs);
    this.#armDeadline();
  }

  #armDeadline(): void {
    if (this.#deadlineTimer) clearTimeout(this.#deadlineTimer);
    if (this.#abort.signal.aborted) return;
    const wait = this.#deadline - this.clock.now();
    if (wait <= 0) {
      this.#lose('deadline');
      return;
    }
    this.#deadlineTimer = setTimeout(() => this.#armDeadline(), wait + 1);
  }

  #lose(reason: LeaseLostReason, message?: string): void {
    if (this.#abort.signal.aborted) return;
    const text = message ?? `etcd session: lease ${this.#leaseId} local deadline passed without an acknowledged keepalive`;
    if (reason === 'closed') this.logger.info({ leaseId: this.#leaseId }, text);
    else this.logger.warn({ leaseId: this.#leaseId, reason }, text);
    this.#abort.abort(new LeaseLostError(reason, text));
    this.#stopTimers();
    if (reason === 'deadline' && this.#leaseId !== '0') {
      // The holder has stopped; free the name now rather than at the server's expiry, if the link allows.
      this.client.leaseClient.leaseRevoke({ ID: this.#leaseId }, callWithin(1000)).catch(() => undefined);
    }
  }

  #stopTimers(): void {
    if (this.#deadlineTimer) clearTimeout(this.#deadlineTimer);
    this.#deadlineTimer = undefined;
    this.#keepAlive?.stop();
  }

  #shutdown(): void {
    this.#lose('closed', 'session closed');
    this.#stopTimers();
    if (this.#ownsClient && !this.#clientClosed) {
      this.#clientClosed = true;
      this.client.close();
    }
  }
}
