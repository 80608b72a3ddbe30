import type { Etcd3 } from 'etcd3';
import type { Clock } from '../../core/clock.js';
import { LocalDeadline } from '../../core/deadline.js';
import { LeaseLostError, type LeaseLostReason } from '../../core/errors.js';
import type { Logger } from '../../core/options.js';
import { callWithin } from './client.js';
import { KeepAliveLoop } from './keepalive.js';

/** What an epoch needs from its session. */
export interface EpochInit {
  readonly client: Etcd3;
  readonly ttlMs: number;
  readonly safetyMarginMs: number;
  readonly clock: Clock;
  readonly logger: Logger;
}

/**
 * One etcd lease of a session, from its grant to its loss: the keepalive loop and the local
 * deadline (core's LocalDeadline: send time of the last acknowledged keepalive + TTL − margin).
 * `signal` aborts with a LeaseLostError — `deadline`, `expired` (etcd says the lease is gone) or
 * `closed`. A lost epoch never comes back; the session grants a new one.
 */
export class LeaseEpoch {
  readonly leaseId: string;
  /** The lease id in lower-case hex, the form etcd's concurrency keys use. */
  readonly leaseIdHex: string;
  readonly #init: EpochInit;
  readonly #abort = new AbortController();
  readonly #deadline: LocalDeadline;
  #keepAlive: KeepAliveLoop | undefined;
  acked = 0;

  constructor(init: EpochInit, leaseId: string, sentAt: number, grantedTtlMs: number) {
    this.#init = init;
    this.leaseId = leaseId;
    this.leaseIdHex = BigInt(leaseId).toString(16);
    this.#deadline = new LocalDeadline({ clock: init.clock, safetyMarginMs: init.safetyMarginMs, onExpire: () => this.lose('deadline') }, sentAt, grantedTtlMs);
    if (this.#abort.signal.aborted) return;
    this.#keepAlive = new KeepAliveLoop(init.client, leaseId, init.ttlMs / 3, init.clock, init.logger, (sent, ttlSeconds) => this.#onAck(sent, ttlSeconds));
  }

  get signal(): AbortSignal {
    return this.#abort.signal;
  }

  /** The local deadline in the clock's milliseconds. */
  get deadline(): number {
    return this.#deadline.at;
  }

  /** True once the signal aborted or the local deadline passed (checked synchronously). */
  get lost(): boolean {
    this.#deadline.expired();
    return this.#abort.signal.aborted;
  }

  remainingMs(): number {
    return this.lost ? 0 : this.#deadline.remainingMs();
  }

  #onAck(sentAt: number, ttlSeconds: number): void {
    if (this.#abort.signal.aborted) return;
    if (!(ttlSeconds > 0)) return this.lose('expired', `etcd session: lease ${this.leaseId} expired or was revoked`);
    this.acked++;
    this.#deadline.acknowledged(sentAt, ttlSeconds * 1000);
  }

  /** Ends the epoch (idempotent). A deadline loss also revokes, freeing the names at once if the link allows. */
  lose(reason: LeaseLostReason, message?: string): void {
    if (this.#abort.signal.aborted) return;
    const text = message ?? `etcd session: lease ${this.leaseId} local deadline passed without an acknowledged keepalive`;
    if (reason === 'closed') this.#init.logger.info({ leaseId: this.leaseId }, text);
    else this.#init.logger.warn({ leaseId: this.leaseId, reason }, text);
    this.#abort.abort(new LeaseLostError(reason, text));
    this.#deadline?.stop(); // (undefined when the grant was already past its deadline)
    this.#keepAlive?.stop();
    if (reason === 'deadline') this.#init.client.leaseClient.leaseRevoke({ ID: this.leaseId }, callWithin(1000)).catch(() => undefined);
  }
}
