import type { Clock } from '../../core/clock.js';

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
 * the server answered), the granted timeout, and the local deadline
 * `lastServerContact + sessionTimeout − safetyMargin` on the monotonic clock. Runs one heartbeat
 * per connection (node-zookeeper-client only pings an idle socket and never notices a silent
 * server) and a timer for the deadline.
 */
export class Liveness {
  lastContact = 0;
  timeout: number;
  #heartbeat: NodeJS.Timeout | undefined;
  #deadlineTimer: NodeJS.Timeout | undefined;
  #run = 0;

  constructor(
    private readonly clock: Clock,
    private readonly margin: number,
    requestedTimeout: number,
  ) {
    this.timeout = requestedTimeout;
  }

  deadline(): number {
    return this.lastContact + this.timeout - this.margin;
  }

  /** A (re)connect: the server just answered; start the heartbeat and the deadline timer. */
  start(grantedTimeout: number, hooks: LivenessHooks): void {
    this.stop();
    const run = ++this.#run;
    this.lastContact = this.clock.now();
    this.timeout = grantedTimeout;
    const period = Math.max(50, this.timeout / 3);
    const beat = (): void => {
      if (run !== this.#run) return;
      const sent = this.clock.now();
      if (hooks.connected()) {
        hooks.ping().then(
          () => {
            if (run !== this.#run) return;
            if (sent > this.lastContact) this.lastContact = sent;
            this.#armDeadline(run, hooks);
          },
          () => undefined,
        );
        const silent = sent - this.lastContact;
        if (silent > (this.timeout * 2) / 3) hooks.onSilent(silent);
      }
      this.#heartbeat = setTimeout(beat, period);
    };
    this.#heartbeat = setTimeout(beat, period);
    this.#armDeadline(run, hooks);
  }

  /** Stops both timers (close, LOST). */
  stop(): void {
    this.#run++;
    if (this.#heartbeat) clearTimeout(this.#heartbeat);
    if (this.#deadlineTimer) clearTimeout(this.#deadlineTimer);
    this.#heartbeat = this.#deadlineTimer = undefined;
  }

  #armDeadline(run: number, hooks: LivenessHooks): void {
    if (this.#deadlineTimer) clearTimeout(this.#deadlineTimer);
    const fire = (): void => {
      if (run !== this.#run) return;
      const late = this.clock.now() - this.deadline();
      if (late < 0) {
        this.#deadlineTimer = setTimeout(fire, -late + 1);
        return;
      }
      this.stop();
      hooks.onDeadline(late);
    };
    this.#deadlineTimer = setTimeout(fire, Math.max(0, this.deadline() - this.clock.now()) + 1);
  }
}
