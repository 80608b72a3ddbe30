import type { Clock } from '../../core/clock.js';
import { LocalDeadline } from '../../core/deadline.js';
import { afterMs } from '../../core/abort.js';

export interface LivenessHooks {
  /** Sends a request the server must answer (the heartbeat). */
  ping(): Promise<unknown>;
  /** True while the client believes it is connected. */
  connected(): boolean;
  /**
   * The link is silent: the heartbeat went unanswered for two thirds of the session timeout, or
   * a request for `callTimeoutMs`. Drop the link.
   */
  onSilent(silentMs: number, noticedBy: 'heartbeat' | 'request'): void;
  /** The local deadline passed: the session must be assumed expired. */
  onDeadline(lateMs: number): void;
}

/**
 * The session's view of its own liveness: `lastServerContact` (the send time of the last request
 * the server answered), the granted timeout, and the local deadline (core's LocalDeadline:
 * `lastServerContact + sessionTimeout − safetyMargin` on the monotonic clock). Runs one heartbeat
 * per connection: node-zookeeper-client only pings an idle socket and never notices a silent
 * server. It also bounds each request a recipe sends (`watchRequest`): ZooKeeper answers a
 * session's requests in order, so one unanswered for `callTimeoutMs` shows a silent link long
 * before the heartbeat can.
 */
export class Liveness {
  lastContact = 0;
  timeout: number;
  #heartbeat: NodeJS.Timeout | undefined;
  #deadline: LocalDeadline | undefined;
  #run = 0;
  /** The current connection's hooks and start time (none between connections). */
  #hooks: LivenessHooks | undefined;
  #startedAt = 0;
  /** When a silent link was last dropped (on the clock); -Infinity before any. */
  droppedSilentAt = -Infinity;

  constructor(
    private readonly clock: Clock,
    private readonly margin: number,
    requestedTimeout: number,
    /** How long one request may go unanswered while connected. */
    readonly callTimeout: number,
  ) {
    this.timeout = requestedTimeout;
  }

  deadline(): number {
    return this.#deadline?.at ?? this.lastContact + this.timeout - this.margin;
  }

  /** A (re)connect: the server just answered; start the heartbeat and the deadline. */
  start(grantedTimeout: number, hooks: LivenessHooks): void {
    this.stop();
    const run = ++this.#run;
    this.lastContact = this.clock.now();
    this.timeout = grantedTimeout;
    this.#hooks = hooks;
    this.#startedAt = this.lastContact;
    this.#deadline = new LocalDeadline(
      {
        clock: this.clock,
        // The server may grant a shorter timeout than requested: keep the margin within the one rule.
        safetyMarginMs: this.margin < (grantedTimeout * 2) / 3 ? this.margin : grantedTimeout / 5,
        onExpire: (late) => {
          if (run !== this.#run) return;
          this.stop();
          hooks.onDeadline(late);
        },
      },
      this.lastContact,
      grantedTimeout,
    );
    const period = Math.max(50, this.timeout / 3);
    const beat = (): void => {
      if (run !== this.#run) return;
      const sent = this.clock.now();
      if (hooks.connected()) {
        hooks.ping().then(
          () => {
            if (run !== this.#run) return;
            if (sent > this.lastContact) this.lastContact = sent;
            this.#deadline?.acknowledged(sent, this.timeout);
          },
          () => undefined,
        );
        const silent = sent - this.lastContact;
        if (silent > (this.timeout * 2) / 3) this.#silent(hooks, silent, 'heartbeat');
      }
      this.#heartbeat = setTimeout(beat, period);
    };
    this.#heartbeat = setTimeout(beat, period);
  }

  /**
   * Arms the bound of one request sent now. Once it has gone unanswered for `callTimeout` while
   * connected — counted from the later of its send and the connection's start, as a request
   * queued while disconnected goes out on reconnect — the link is dropped (`onSilent`) and
   * `onTimeout` runs; every request in flight then fails with a connection loss. While
   * disconnected, `failFast` runs `onTimeout` at once (the link is down already); otherwise the
   * count waits for a connection. A request of a session that ended is rejected by its caller's
   * race with the session's signal, which disarms this. Returns the disarm function.
   */
  watchRequest(failFast: boolean, onTimeout: () => void): () => void {
    const sentAt = this.clock.now();
    // The first bound is the same length for every request: one Node timer shares them all (five
    // requests per contended grant); a re-arm for the rest of a bound is rare and has its own.
    let cancel: () => void;
    const arm = (ms: number): void => {
      const timer = setTimeout(check, Math.max(1, ms));
      cancel = () => clearTimeout(timer);
    };
    const check = (): void => {
      const hooks = this.#hooks;
      if (!hooks?.connected()) return failFast ? onTimeout() : arm(this.callTimeout);
      const waited = this.clock.now() - Math.max(sentAt, this.#startedAt);
      if (waited < this.callTimeout) return arm(this.callTimeout - waited);
      this.#silent(hooks, waited, 'request');
      onTimeout();
    };
    cancel = afterMs(this.callTimeout, check);
    return () => cancel();
  }

  #silent(hooks: LivenessHooks, silentMs: number, noticedBy: 'heartbeat' | 'request'): void {
    this.droppedSilentAt = this.clock.now();
    hooks.onSilent(silentMs, noticedBy);
  }

  /** True once the current deadline has passed (checked on the clock now). */
  expired(): boolean {
    return this.#deadline?.expired() ?? false;
  }

  /** Stops the heartbeat and the deadline (close, LOST). */
  stop(): void {
    this.#run++;
    this.#hooks = undefined;
    if (this.#heartbeat) clearTimeout(this.#heartbeat);
    this.#heartbeat = undefined;
    this.#deadline?.stop();
  }
}
