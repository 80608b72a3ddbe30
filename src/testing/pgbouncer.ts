import { execFile } from 'node:child_process';
import { chownSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { ConfigError, ServerStartError } from '../core/errors.js';
import { optionalEnum, optionalNumber, optionalString, requireObject, requireOptions } from '../core/validate.js';
import { freePort } from './net.js';
import type { SpawnSpec } from './process.js';
import { findBinDir, postgresUser, type PostgresServer } from './postgres.js';
import { LocalServer } from './server.js';

const run = promisify(execFile);

/** Options of a {@link PgBouncerServer}. */
export interface PgBouncerServerOptions {
  /** The kit's Postgres to pool (started). */
  postgres: PostgresServer;
  /** `transaction` (a server connection per transaction) or `session` (per client connection). @default 'transaction' */
  poolMode?: 'transaction' | 'session' | 'statement';
  /** Server connections per user and database. @default 4 */
  poolSize?: number;
  /**
   * Users PgBouncer knows (its `auth_file`), name → password; PgBouncer logs in to Postgres with
   * that password. `postgres` (no password, trust) is always there.
   */
  users?: Record<string, string>;
  /** How clients authenticate to PgBouncer. @default 'trust' */
  authType?: 'trust' | 'scram-sha-256';
  /** @default '/usr/sbin/pgbouncer' */
  binary?: string;
}

/**
 * A real PgBouncer (Debian's `pgbouncer`) in front of the kit's Postgres, on a loopback port. It
 * refuses to run as root, so as root it runs as `postgres`, like the server. Every database of
 * the server is reachable through it under its own name.
 */
export class PgBouncerServer extends LocalServer {
  readonly name = 'pgbouncer';
  /** Always `127.0.0.1`. */
  readonly host = '127.0.0.1';
  /** PgBouncer's `pool_mode`. */
  readonly poolMode: 'transaction' | 'session' | 'statement';
  /** PgBouncer's `default_pool_size`: server connections per user and database. */
  readonly poolSize: number;
  readonly #postgres: PostgresServer;
  readonly #users: Record<string, string>;
  readonly #authType: 'trust' | 'scram-sha-256';
  readonly #binary: string;
  readonly #owner = postgresUser();
  #port: number | undefined;

  constructor(options: PgBouncerServerOptions) {
    super();
    const o = requireOptions('options', options, { postgres: true, poolMode: true, poolSize: true, users: true, authType: true, binary: true });
    if (!o.postgres || typeof (o.postgres as { connectionConfig?: unknown }).connectionConfig !== 'object') {
      throw new ConfigError('postgres', 'must be a started PostgresServer');
    }
    this.#postgres = o.postgres;
    this.poolMode = optionalEnum('poolMode', o.poolMode, ['transaction', 'session', 'statement'] as const, 'transaction');
    this.poolSize = optionalNumber('poolSize', o.poolSize, 4, { integer: true, min: 1, max: 1000 });
    this.#users = requireObject('users', o.users);
    for (const [u, p] of Object.entries(this.#users)) {
      if (!/^\w+$/.test(u) || typeof p !== 'string' || /["\s]/.test(p)) throw new ConfigError('users', `user '${u}' needs a word name and a password without quotes or spaces`);
    }
    this.#authType = optionalEnum('authType', o.authType, ['trust', 'scram-sha-256'] as const, 'trust');
    this.#binary = optionalString('binary', o.binary, '/usr/sbin/pgbouncer');
    this.stopSignal = 'SIGINT'; // PgBouncer's "safe shutdown" waits for clients; SIGINT is immediate
    this.readyTimeoutMs = 10_000;
  }

  /** The port it listens on (after `start()`). */
  get port(): number {
    if (this.#port === undefined) throw new ServerStartError('pgbouncer: not started', '');
    return this.#port;
  }

  /** Options for `new pg.Pool(...)` through PgBouncer, as `postgres` (or another of `users`). */
  connectionConfig(user = 'postgres'): {
    /** Always `127.0.0.1`. */
    host: string;
    /** PgBouncer's port. */
    port: number;
    /** The user. */
    user: string;
    /** `postgres`. */
    database: string;
    /** The user's password, when it has one. */
    password?: string;
  } {
    const password = this.#users[user];
    return { host: this.host, port: this.port, user, database: 'postgres', ...(password ? { password } : {}) };
  }

  protected override runAs(): { uid: number; gid: number } | undefined {
    return this.#owner;
  }

  protected async allocatePorts(): Promise<void> {
    this.#port = await freePort();
  }

  protected spawnSpec(dir: string): SpawnSpec {
    const pg = this.#postgres;
    const users = { postgres: '', ...this.#users };
    writeFileSync(join(dir, 'userlist.txt'), Object.entries(users).map(([u, p]) => `"${u}" "${p}"`).join('\n') + '\n', { mode: 0o600 });
    const ini = [
      '[databases]',
      `* = host=${pg.host} port=${pg.port}`,
      '[pgbouncer]',
      `listen_addr = ${this.host}`,
      `listen_port = ${this.port}`,
      `unix_socket_dir = ${dir}`,
      `auth_type = ${this.#authType}`,
      `auth_file = ${join(dir, 'userlist.txt')}`,
      `pool_mode = ${this.poolMode}`,
      `default_pool_size = ${this.poolSize}`,
      'max_client_conn = 1000',
      'admin_users = postgres',
      'stats_users = postgres',
      // node-postgres sends none of these, other clients do; PgBouncer refuses unknown ones.
      'ignore_startup_parameters = extra_float_digits,options',
      'server_reset_query = DISCARD ALL',
      'log_connections = 0',
      'log_disconnections = 0',
    ];
    writeFileSync(join(dir, 'pgbouncer.ini'), ini.join('\n') + '\n');
    if (this.#owner) {
      for (const f of ['userlist.txt', 'pgbouncer.ini']) chownSync(join(dir, f), this.#owner.uid, this.#owner.gid);
    }
    return { command: this.#binary, args: [join(dir, 'pgbouncer.ini')], cwd: dir, logFile: join(dir, 'server.log') };
  }

  /** Runs one statement on PgBouncer's admin console (`SHOW POOLS;`, `SHOW SERVERS;`) and returns its output (psql -A). */
  async admin(sql: string): Promise<string> {
    const { stdout } = await run(join(findBinDir(), 'psql'), ['-h', this.host, '-p', String(this.port), '-U', 'postgres', '-d', 'pgbouncer', '-A', '-F', ',', '-c', sql], { timeout: 5000 });
    return stdout;
  }

  protected async probe(): Promise<boolean> {
    return run(join(findBinDir(), 'pg_isready'), ['-q', '-h', this.host, '-p', String(this.port), '-U', 'postgres', '-t', '1']).then(
      () => true,
      () => false,
    );
  }
}
