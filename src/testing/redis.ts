import { StateError } from '../core/errors.js';
import { LocalServer } from './server.js';
import { freePort, tcpExchange } from './net.js';
import type { SpawnSpec } from './process.js';
import type { TestCertificates } from './tls.js';
import { ConfigError, ServerStartError } from '../core/errors.js';
import { optionalString, requireOptions, requireNumber, requireString } from '../core/validate.js';
import { sleep } from '../core/abort.js';
import { monotonicClock } from '../core/clock.js';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** Options of a {@link RedisServer}. */
export interface RedisServerOptions {
  /** Port to listen on (the TLS port when `tls` is given). @default a free loopback port */
  port?: number;
  /** @default 'redis-server' */
  binary?: string;
  /** Extra command-line arguments, e.g. `['--maxmemory', '10mb']`. */
  args?: string[];
  /**
   * Serve TLS only (`--tls-port`, plain port off) with these certificates; clients must trust
   * `ca` and present the client certificate (`--tls-auth-clients yes`, as a hardened deployment).
   */
  tls?: TestCertificates;
  /**
   * ACL users, one rule list each, as in an ACL file without the leading `user`: e.g.
   * `'app on >secret ~app:* &app:* +evalsha'`. With any user given, the default user gets
   * `adminPassword` and full rights (the kit's own commands use it).
   */
  aclUsers?: string[];
  /** Password of the default user (full rights). @default 'tenure-admin' when aclUsers are given, else none */
  adminPassword?: string;
  /** Start as a replica of this server (`--replicaof`). */
  replicaOf?: {
    /** @default 127.0.0.1 */
    host?: string;
    /** The primary's port. */
    port: number;
  };
}

/** The RESP encoding of one command. */
function resp(args: readonly string[]): string {
  return `*${args.length}\r\n${args.map((a) => `$${Buffer.byteLength(a)}\r\n${a}\r\n`).join('')}`;
}

/** The index just past one complete RESP reply starting at `at`, or -1 while incomplete. */
function skipReply(r: Buffer, at: number): number {
  const eol = r.indexOf('\r\n', at);
  if (eol < 0) return -1;
  const kind = String.fromCharCode(r[at]!);
  const n = Number(r.subarray(at + 1, eol).toString());
  if (kind === '$') return n < 0 ? eol + 2 : r.length >= eol + 2 + n + 2 ? eol + 2 + n + 2 : -1;
  if (kind === '*') {
    let i = eol + 2;
    for (let k = 0; k < n && i >= 0; k++) i = skipReply(r, i);
    return i;
  }
  return eol + 2;
}

/** True once `r` holds `n` complete RESP replies. */
function hasReplies(r: string, n: number): boolean {
  const b = Buffer.from(r);
  let at = 0;
  for (let i = 0; i < n && at >= 0; i++) at = skipReply(b, at);
  return at >= 0;
}

/**
 * A real `redis-server` on a loopback port, without persistence (a restart loses all data).
 * Optionally TLS-only, with ACL users, as a replica (`promote()` makes it a primary), or as a
 * cluster node (see {@link RedisCluster}).
 */
export class RedisServer extends LocalServer {
  readonly name: string;
  /** Always `127.0.0.1`. */
  readonly host = '127.0.0.1';
  #port: number | undefined;
  #busPort: number | undefined;
  readonly #fixedPort: boolean;
  readonly #binary: string;
  readonly #args: string[];
  readonly #tls: TestCertificates | undefined;
  readonly #aclUsers: string[];
  /** The default user's password, when it has one. */
  readonly adminPassword: string | undefined;
  #replicaOf: { host: string; port: number } | undefined;
  readonly #cluster: boolean;

  constructor(options?: RedisServerOptions, member?: { name: string; dir: string }) {
    super();
    const o = requireOptions('options', options, { port: true, binary: true, args: true, tls: true, aclUsers: true, adminPassword: true, replicaOf: true });
    if (o.port !== undefined) this.#port = requireNumber('port', o.port, { integer: true, min: 1, max: 65535 });
    this.#fixedPort = o.port !== undefined;
    this.#binary = optionalString('binary', o.binary, 'redis-server');
    this.#args = o.args ?? [];
    this.#tls = o.tls;
    this.#aclUsers = (o.aclUsers ?? []).map((u, i) => requireString(`aclUsers[${i}]`, u, { pattern: /^[^\r\n]+$/, patternHint: 'be one line' }));
    if (this.#aclUsers.some((u) => /^default\s/.test(u))) throw new ConfigError('aclUsers', "must not redefine 'default' (use adminPassword)");
    const admin = o.adminPassword ?? (this.#aclUsers.length > 0 ? 'tenure-admin' : undefined);
    this.adminPassword = admin === undefined ? undefined : requireString('adminPassword', admin, { pattern: /^\S+$/, patternHint: 'contain no spaces' });
    const replicaOf = o.replicaOf && requireOptions('replicaOf', o.replicaOf, { host: true, port: true });
    if (replicaOf) this.#replicaOf = { host: replicaOf.host ?? '127.0.0.1', port: requireNumber('replicaOf.port', replicaOf.port, { integer: true, min: 1, max: 65535 }) };
    this.#cluster = member !== undefined;
    this.name = member ? `redis-${member.name}` : 'redis';
    if (member) {
      this.useDir(member.dir);
      this.portRetries = 0;
    }
    this.readyTimeoutMs = 10_000;
  }

  /** @internal a cluster picks its members' ports at once. */
  setPorts(port: number, busPort: number): void {
    this.#port = port;
    this.#busPort = busPort;
  }

  /** The port it listens on (after `start()`). */
  get port(): number {
    if (this.#port === undefined) throw new StateError('redis: not started');
    return this.#port;
  }

  /** `redis://127.0.0.1:<port>` (`rediss://` with TLS) */
  get connectionString(): string {
    return `${this.#tls ? 'rediss' : 'redis'}://${this.host}:${this.port}`;
  }

  /** `{ host, port }` for ioredis. */
  get endpoint(): {
    /** Always `127.0.0.1`. */
    host: string;
    /** The listening port. */
    port: number;
  } {
    return { host: this.host, port: this.port };
  }

  /** ioredis `tls` options that trust this server (with the client certificate), when it serves TLS. */
  get tlsOptions(): {
    /** The test CA (PEM). */
    ca: string;
    /** The client certificate (PEM). */
    cert: string;
    /** Its key (PEM). */
    key: string;
    /** The name the server certificate is for. */
    servername: string;
  } | undefined {
    const t = this.#tls;
    return t && { ca: t.ca, cert: t.clientCert, key: t.clientKey, servername: 'localhost' };
  }

  /** The kit's own TLS client options: the CA and the client certificate the server requires. */
  #clientTls(): { ca: string; cert: string; key: string; rejectUnauthorized: boolean } | undefined {
    const t = this.#tls;
    return t && { ca: t.ca, cert: t.clientCert, key: t.clientKey, rejectUnauthorized: !t.expiredServer };
  }

  protected async allocatePorts(): Promise<void> {
    if (!this.#fixedPort && !this.#cluster) this.#port = await freePort();
  }

  protected spawnSpec(dir: string): SpawnSpec {
    // No diskless-sync delay: a replica's first sync would otherwise wait 5 s for more replicas.
    const args = ['--bind', this.host, '--save', '', '--appendonly', 'no', '--dir', dir, '--daemonize', 'no', '--protected-mode', 'no', '--repl-diskless-sync-delay', '0'];
    const t = this.#tls;
    if (t) {
      args.push('--port', '0', '--tls-port', String(this.port), '--tls-cert-file', t.certFile, '--tls-key-file', t.keyFile, '--tls-ca-cert-file', t.caFile, '--tls-auth-clients', 'yes');
      // A replica (and the cluster bus) speak TLS to their peers too.
      args.push('--tls-replication', 'yes', '--tls-cluster', 'yes');
    } else {
      args.push('--port', String(this.port));
    }
    if (this.adminPassword !== undefined) {
      const file = join(dir, 'users.acl');
      writeFileSync(file, [`user default on >${this.adminPassword} ~* &* +@all`, ...this.#aclUsers.map((u) => `user ${u}`)].join('\n') + '\n', { mode: 0o600 });
      args.push('--aclfile', file, '--masterauth', this.adminPassword);
    }
    if (this.#replicaOf) args.push('--replicaof', this.#replicaOf.host, String(this.#replicaOf.port));
    if (this.#cluster) {
      args.push('--cluster-enabled', 'yes', '--cluster-config-file', join(dir, 'nodes.conf'), '--cluster-node-timeout', '2000');
      if (this.#busPort !== undefined) args.push('--cluster-port', String(this.#busPort));
    }
    return { command: this.#binary, args: [...args, ...this.#args], logFile: join(dir, 'server.log') };
  }

  /**
   * Runs one command as the default user (with `adminPassword`) and returns the raw RESP reply,
   * e.g. `command('INFO', 'replication')`. For the kit's own operations; tests use a client.
   */
  async command(...args: string[]): Promise<string> {
    const auth = this.adminPassword === undefined ? [] : [resp(['AUTH', 'default', this.adminPassword])];
    const reply = await tcpExchange(this.port, [...auth, resp(args)].join(''), {
      timeoutMs: 2000,
      until: (r) => hasReplies(r, auth.length + 1),
      tls: this.#clientTls(),
    });
    return auth.length ? reply.slice(reply.indexOf('\r\n') + 2) : reply;
  }

  /** `master` or `slave`, from `ROLE`. */
  async role(): Promise<string> {
    const r = await this.command('ROLE');
    return /\$\d+\r\n(\w+)/.exec(r)?.[1] ?? '';
  }

  /** `REPLICAOF NO ONE`: a replica becomes a primary with a new replication id. */
  async promote(): Promise<void> {
    const r = await this.command('REPLICAOF', 'NO', 'ONE');
    if (!r.startsWith('+OK')) throw new ServerStartError(`${this.name}: REPLICAOF NO ONE failed: ${r.trim()}`, this.log());
    this.#replicaOf = undefined;
  }

  /** Waits until this replica has finished its initial sync with its primary. */
  async waitForSync(timeoutMs = 10_000): Promise<void> {
    const end = monotonicClock.now() + timeoutMs;
    for (;;) {
      const info = await this.command('INFO', 'replication').catch(() => '');
      if (/master_link_status:up/.test(info)) return;
      if (monotonicClock.now() > end) throw new ServerStartError(`${this.name}: replica not in sync within ${timeoutMs} ms`, this.log());
      await sleep(20);
    }
  }

  protected async probe(): Promise<boolean> {
    // Redis keeps the socket open: read the first reply line, not to EOF. With ACLs the
    // unauthenticated PING is refused with NOAUTH, which also means "serving".
    const reply = await tcpExchange(this.port, 'PING\r\n', { timeoutMs: 500, until: (r) => r.includes('\r\n'), tls: this.#clientTls() });
    return reply.startsWith('+PONG') || reply.startsWith('-NOAUTH');
  }
}
