import type { Clock } from '../../core/clock.js';
import { LocalDeadline } from '../../core/deadline.js';

export interface LivenessHooks {
  /** Sends a request the server must answer (the heartbeat). */
  ping(): Promise<unknown>;
  /** True while the client believes it is connected. */
  connected(): boolean;
  /** The server has not answered for two thirds of the session timeout: drop the link. */
  onSilent(silentMs: number): void;
  /** The local deadline passed: the session must be assumed expired. */
  onDeadline(lateMs: number): void;
}

/**
 * The session's view of its own liveness: `lastServerContact` (the send time of the last request
 * the server answered), the granted timeout, and the local deadline (core's LocalDeadline:
 * `lastServerContact + sessionTimeout − safetyMargin` on the monotonic clock). Runs one heartbeat
 * per connection: node-zookeeper-client only pings an idle socket and never notices a silent
 * server.
 */
export class Liveness {
  lastContact = 0;
  timeout: number;
  #heartbeat: NodeJS.Timeout | undefined;
  #deadline: LocalDeadline | undefined;
  #run = 0;

  constructor(
    private readonly clock: Clock,
    private readonly margin: number,
    requestedTimeout: number,
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
        if (silent > (this.timeout * 2) / 3) hooks.onSilent(silent);
      }
      this.#heartbeat = setTimeout(beat, period);
    };
    this.#heartbeat = setTimeout(beat, period);
  }

  /** True once the current deadline has passed (checked on the clock now). */
  expired(): boolean {
    return this.#deadline?.expired() ?? false;
  }

  /** Stops the heartbeat and the deadline (close, LOST). */
  stop(): void {
    this.#run++;
    if (this.#heartbeat) clearTimeout(this.#heartbeat);
    this.#heartbeat = undefined;
    this.#deadline?.stop();
  }
}
