import type { Etcd3, IDuplexStream, ILeaseKeepAliveRequest, ILeaseKeepAliveResponse } from 'etcd3';
import { Backoff } from '../../core/backoff.js';
import { ClosedError } from '../../core/errors.js';
import type { Logger } from '../../core/options.js';
import type { Clock } from '../../core/clock.js';

type Stream = IDuplexStream<ILeaseKeepAliveRequest, ILeaseKeepAliveResponse>;

/**
 * Sends a keepalive for one lease every `intervalMs` on a LeaseKeepAlive stream and reports
 * each answer with the **send time** of the request it answers (etcd answers a stream's requests
 * in order). A stream that errors is replaced 100 ms later; one that leaves a request unanswered
 * for a whole period is replaced at the next tick. Deciding what an answer (or its absence)
 * means is the session's job.
 */
export class KeepAliveLoop {
  readonly #client: Etcd3;
  readonly #leaseId: string;
  readonly #intervalMs: number;
  readonly #clock: Clock;
  readonly #logger: Logger;
  readonly #onAck: (sentAt: number, ttlSeconds: number) => void;
  #pending: number[] = [];
  #stream: Stream | undefined;
  #opening: Promise<Stream> | undefined;
  #timer: NodeJS.Timeout | undefined;
  #stopped = false;
  /** Pauses before re-opening a failed stream; reset by every acknowledged keepalive. */
  readonly #retry: Backoff;

  constructor(client: Etcd3, leaseId: string, intervalMs: number, clock: Clock, logger: Logger, onAck: (sentAt: number, ttlSeconds: number) => void) {
    this.#client = client;
    this.#leaseId = leaseId;
    this.#intervalMs = intervalMs;
    this.#clock = clock;
    this.#logger = logger;
    this.#onAck = onAck;
    this.#retry = new Backoff({ initialMs: 50, maxMs: Math.max(50, intervalMs / 2) });
    this.#tick();
  }

  /** Stops sending and closes the stream. Idempotent. */
  stop(): void {
    this.#stopped = true;
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#drop();
  }

  #tick(): void {
    this.#timer = undefined;
    if (this.#stopped) return;
    // A keepalive unanswered for a whole period: the stream may be dead; open a fresh one.
    if (this.#pending.length > 0 && this.#clock.now() - this.#pending[0]! > this.#intervalMs) this.#drop();
    this.#open()
      .then((stream) => {
        if (this.#stopped || stream !== this.#stream) return;
        this.#pending.push(this.#clock.now());
        stream.write({ ID: this.#leaseId });
      })
      .catch((e: unknown) => {
        this.#logger.debug({ err: e }, 'etcd session: keepalive stream failed; retrying');
        this.#drop();
      });
    this.#schedule(this.#intervalMs);
  }

  #schedule(ms: number): void {
    if (this.#stopped) return;
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = setTimeout(() => this.#tick(), ms);
  }

  #open(): Promise<Stream> {
    if (this.#stream) return Promise.resolve(this.#stream);
    this.#opening ??= this.#client.leaseClient.leaseKeepAlive().then(
      (stream) => {
        this.#opening = undefined;
        if (this.#stopped) {
          stream.on('error', () => undefined);
          stream.end();
          throw new ClosedError('etcd keepalive');
        }
        this.#stream = stream;
        this.#pending = [];
        stream.on('data', (res: ILeaseKeepAliveResponse) => {
          if (stream !== this.#stream) return;
          const sent = this.#pending.shift();
          if (sent !== undefined) this.#onAck(sent, Number(res.TTL));
          this.#retry.reset();
        });
        const onFail = (e?: unknown): void => {
          if (stream !== this.#stream) return;
          this.#logger.debug({ err: e }, 'etcd session: keepalive stream ended');
          this.#drop();
          this.#schedule(this.#retry.next()); // retry soon, not a whole period later
        };
        stream.on('error', onFail);
        stream.on('end', onFail);
        return stream;
      },
      (e: unknown) => {
        this.#opening = undefined;
        this.#schedule(this.#retry.next());
        throw e;
      },
    );
    return this.#opening;
  }

  #drop(): void {
    const s = this.#stream;
    this.#stream = undefined;
    this.#pending = [];
    if (!s) return;
    s.on('error', () => undefined);
    try {
      // Cancel, not only end: a half-closed stream on a silent link keeps its HTTP/2 session (and
      // the process) alive until the server answers, which may be never.
      s.cancel();
      s.end();
    } catch {
      // already broken
    }
  }
}
