import { StateError } from '../core/errors.js';
import { LocalServer } from './server.js';
import { freePort, tcpExchange } from './net.js';
import type { SpawnSpec } from './process.js';
import { optionalString, requireOptions, requireNumber } from '../core/validate.js';
import { join } from 'node:path';

export interface RedisServerOptions {
  /** Port to listen on. @default a free loopback port */
  port?: number;
  /** @default 'redis-server' */
  binary?: string;
  /** Extra command-line arguments, e.g. `['--maxmemory', '10mb']`. */
  args?: string[];
}

/** A real `redis-server` on a loopback port, without persistence (a restart loses all data). */
export class RedisServer extends LocalServer {
  readonly name = 'redis';
  readonly host = '127.0.0.1';
  #port: number | undefined;
  readonly #fixedPort: boolean;
  readonly #binary: string;
  readonly #args: string[];

  constructor(options?: RedisServerOptions) {
    super();
    const o = requireOptions('options', options);
    if (o.port !== undefined) this.#port = requireNumber('port', o.port, { integer: true, min: 1, max: 65535 });
    this.#fixedPort = o.port !== undefined;
    this.#binary = optionalString('binary', o.binary, 'redis-server');
    this.#args = o.args ?? [];
    this.readyTimeoutMs = 10_000;
  }

  get port(): number {
    if (this.#port === undefined) throw new StateError('redis: not started');
    return this.#port;
  }

  /** `redis://127.0.0.1:<port>` */
  get connectionString(): string {
    return `redis://${this.host}:${this.port}`;
  }

  /** `{ host, port }` for ioredis. */
  get endpoint(): { host: string; port: number } {
    return { host: this.host, port: this.port };
  }

  protected async allocatePorts(): Promise<void> {
    if (!this.#fixedPort) this.#port = await freePort();
  }

  protected spawnSpec(dir: string): SpawnSpec {
    return {
      command: this.#binary,
      args: [
        '--port', String(this.port), '--bind', this.host, '--save', '', '--appendonly', 'no',
        '--dir', dir, '--daemonize', 'no', '--protected-mode', 'no', ...this.#args,
      ],
      logFile: join(dir, 'server.log'),
    };
  }

  protected async probe(): Promise<boolean> {
    // Redis keeps the socket open: read the first reply line, not to EOF.
    const reply = await tcpExchange(this.port, 'PING\r\n', { timeoutMs: 500, until: (r) => r.includes('\r\n') });
    return reply.startsWith('+PONG');
  }
}
