import { createServer, connect, type Server, type Socket } from 'node:net';
import { ClosedError } from '../core/errors.js';
import { requireNumber, requireOptions, optionalNumber } from '../core/validate.js';

/** Options of a {@link FaultProxy}. */
export interface FaultProxyOptions {
  /** The server to forward to. */
  target: {
    /** @default 127.0.0.1 */
    host?: string;
    /** The server's port. */
    port: number;
  };
  /** Port to listen on. @default a free loopback port */
  port?: number;
}

type Mode = 'pass' | 'blackhole';

/** One direction of one connection: ordered, optionally delayed or held. */
class Pipe {
  readonly #queue: { due: number; data: Buffer }[] = [];
  #timer: NodeJS.Timeout | undefined;
  #ended = false;
  bytes = 0;

  constructor(
    private readonly proxy: FaultProxy,
    private readonly out: () => Socket | undefined,
  ) {}

  push(data: Buffer): void {
    this.#queue.push({ due: performance.now() + this.proxy.delayMs, data });
    this.pump();
  }

  end(): void {
    this.#ended = true;
    this.pump();
  }

  pump(): void {
    if (this.#timer) return;
    const out = this.out();
    while (this.#queue.length > 0) {
      if (this.proxy.mode === 'blackhole' || !out) return;
      const head = this.#queue[0]!;
      const wait = head.due - performance.now();
      if (wait > 0) {
        this.#timer = setTimeout(() => {
          this.#timer = undefined;
          this.pump();
        }, wait);
        return;
      }
      this.#queue.shift();
      this.bytes += head.data.length;
      if (!out.destroyed) out.write(head.data);
    }
    if (this.#ended && out && this.proxy.mode !== 'blackhole' && !out.destroyed) out.end();
  }

  clear(): void {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#queue.length = 0;
  }
}

class Link {
  upstream: Socket | undefined;
  readonly up: Pipe;
  readonly down: Pipe;
  closed = false;

  constructor(
    private readonly proxy: FaultProxy,
    readonly client: Socket,
  ) {
    this.up = new Pipe(proxy, () => this.upstream);
    this.down = new Pipe(proxy, () => this.client);
    client.on('data', (d: Buffer) => this.up.push(d));
    client.on('end', () => this.up.end());
    client.on('error', () => this.destroy(false));
    client.on('close', () => this.destroy(false));
    if (proxy.mode !== 'blackhole') this.connectUpstream();
  }

  connectUpstream(): void {
    if (this.upstream || this.closed) return;
    const { host, port } = this.proxy.target;
    const s = connect({ host, port });
    this.upstream = s;
    s.setNoDelay(true);
    s.on('connect', () => this.up.pump());
    s.on('data', (d: Buffer) => this.down.push(d));
    s.on('end', () => this.down.end());
    s.on('error', () => this.destroy(false));
    s.on('close', () => this.destroy(false));
  }

  pump(): void {
    if (this.proxy.mode !== 'blackhole') this.connectUpstream();
    this.up.pump();
    this.down.pump();
  }

  destroy(reset: boolean): void {
    if (this.closed) return;
    this.closed = true;
    this.up.clear();
    this.down.clear();
    for (const s of [this.client, this.upstream]) {
      if (!s || s.destroyed) continue;
      if (reset && typeof s.resetAndDestroy === 'function' && !s.connecting) s.resetAndDestroy();
      else s.destroy();
    }
    this.proxy.forget(this);
  }
}

/**
 * A TCP proxy in front of a real server, to partition one client alone: put the client's
 * connection string on the proxy's port, then
 * - `delay(ms)` adds latency to every chunk in both directions (order kept),
 * - `blackhole()` accepts connections but forwards nothing either way, like a partition (held
 *   data is delivered on `heal()`, as TCP would retransmit it),
 * - `cut()` resets every open connection (new ones are accepted),
 * - `heal()` returns to plain forwarding.
 */
export class FaultProxy implements AsyncDisposable {
  /** The server it forwards to. */
  readonly target: {
    /** The server's host. */
    host: string;
    /** The server's port. */
    port: number;
  };
  /** Where it listens: always `127.0.0.1`. */
  readonly host = '127.0.0.1';
  /** `pass` (forwarding) or `blackhole` (holding everything). */
  mode: Mode = 'pass';
  /** Delay added to every chunk forwarded, in ms (`delay()`). */
  delayMs = 0;
  #server: Server | undefined;
  #port: number;
  readonly #links = new Set<Link>();
  #stopped = false;
  #accepted = 0;

  constructor(options: FaultProxyOptions) {
    const o = requireOptions('options', options, { target: true, port: true });
    const target = requireOptions('target', o.target, { host: true, port: true });
    this.target = {
      host: target.host ?? '127.0.0.1',
      port: requireNumber('target.port', target.port, { integer: true, min: 1, max: 65535 }),
    };
    this.#port = optionalNumber('port', o.port, 0, { integer: true, min: 0, max: 65535 });
  }

  /** Starts listening. */
  async start(): Promise<this> {
    if (this.#stopped) throw new ClosedError('FaultProxy');
    if (this.#server) return this;
    const server = createServer({ noDelay: true }, (sock) => {
      this.#accepted++;
      this.#links.add(new Link(this, sock));
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen({ host: this.host, port: this.#port }, () => resolve());
    });
    server.unref();
    const addr = server.address();
    this.#port = typeof addr === 'object' && addr ? addr.port : this.#port;
    this.#server = server;
    return this;
  }

  /** The port it listens on (after `start()`). */
  get port(): number {
    return this.#port;
  }

  /** `127.0.0.1:<port>` */
  get address(): string {
    return `${this.host}:${this.#port}`;
  }

  /** Open connections right now. */
  get connections(): number {
    return this.#links.size;
  }

  /** Connections accepted since start. */
  get accepted(): number {
    return this.#accepted;
  }

  /** Adds `ms` of latency to every chunk from now on, both directions. */
  delay(ms: number): void {
    this.delayMs = requireNumber('ms', ms, { min: 0 });
  }

  /** Forwards nothing, either way, on open and new connections, until `heal()`. */
  blackhole(): void {
    this.mode = 'blackhole';
  }

  /** Resets every open connection (TCP RST to both sides). New connections are accepted. */
  cut(): void {
    for (const l of [...this.#links]) l.destroy(true);
  }

  /** Back to plain forwarding: no delay, no blackhole; held data is delivered. */
  heal(): void {
    this.mode = 'pass';
    this.delayMs = 0;
    for (const l of this.#links) l.pump();
  }

  /** @internal */
  forget(link: Link): void {
    this.#links.delete(link);
  }

  /** Closes every connection and stops listening. Idempotent. */
  async stop(): Promise<void> {
    if (this.#stopped) return;
    this.#stopped = true;
    for (const l of [...this.#links]) l.destroy(false);
    const server = this.#server;
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  /** Same as `stop()`, for `await using`. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.stop();
  }
}
