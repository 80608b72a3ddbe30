import { execFile } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, writeFileSync, chownSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { ConfigError, ServerStartError, StateError } from '../core/errors.js';
import { optionalString, requireNumber, requireObject, requireOptions } from '../core/validate.js';
import { freePort } from './net.js';
import { makeTempDir, type SpawnSpec } from './process.js';
import type { TestCertificates } from './tls.js';
import { LocalServer } from './server.js';

const run = promisify(execFile);

/** Options of a {@link PostgresServer}. */
export interface PostgresServerOptions {
  /** Port to listen on. @default a free loopback port */
  port?: number;
  /** Directory holding `initdb` and `postgres`. @default the newest /usr/lib/postgresql/<v>/bin */
  binDir?: string;
  /** Extra `-c name=value` settings. */
  settings?: Record<string, string | number>;
  /** Serve TLS (`ssl=on`) with these certificates (owned by the server's user). */
  ssl?: TestCertificates;
  /**
   * Lines that replace `pg_hba.conf`, e.g. `['hostssl all app 127.0.0.1/32 scram-sha-256']`.
   * `local all all trust` and `host all postgres 127.0.0.1/32 trust` (the kit's superuser) are
   * always kept first. @default initdb's: trust for everyone
   */
  hba?: string[];
}

export function findBinDir(): string {
  const base = '/usr/lib/postgresql';
  const versions = existsSync(base)
    ? readdirSync(base)
        .filter((v) => existsSync(join(base, v, 'bin', 'initdb')))
        .sort((a, b) => Number(b) - Number(a))
    : [];
  if (versions.length === 0) {
    throw new ServerStartError('postgres: no initdb under /usr/lib/postgresql/*/bin (run scripts/ensure-servers.sh)', '');
  }
  return join(base, versions[0]!, 'bin');
}

/** The user Postgres runs as: `postgres` when we are root (Postgres refuses root), else ourselves. */
export function postgresUser(): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const line = readFileSync('/etc/passwd', 'utf8')
    .split('\n')
    .find((l) => l.startsWith('postgres:'));
  if (!line) throw new ServerStartError('postgres: running as root but there is no postgres user to run the server as', '');
  const [, , uid, gid] = line.split(':');
  return { uid: Number(uid), gid: Number(gid) };
}

const templates = new Map<string, Promise<string>>();

/**
 * initdb once per process and bin dir, kept as one tar archive; each server unpacks it (~10×
 * faster than initdb). One file, not initdb's ~1,000: the process's exit handler removes it in a
 * few ms, where the tree took up to 300 ms on a loaded 2-core machine, and a test runner that
 * SIGKILLs its worker 500 ms after SIGTERM (Vitest does) cut that removal short and left it behind.
 */
function template(binDir: string, owner: { uid: number; gid: number } | undefined): Promise<string> {
  let t = templates.get(binDir);
  if (!t) {
    t = (async () => {
      const dir = makeTempDir('pg-template', undefined, owner);
      const pgdata = join(dir, 'pgdata');
      try {
        await run(
          join(binDir, 'initdb'),
          ['-D', pgdata, '-U', 'postgres', '--auth=trust', '--no-sync', '-E', 'UTF8', '--locale=C.UTF-8', '--no-instructions'],
          { uid: owner?.uid, gid: owner?.gid, env: { ...process.env, LC_ALL: 'C.UTF-8' }, cwd: dir },
        );
      } catch (e) {
        const err = e as { stderr?: string; stdout?: string };
        throw new ServerStartError('postgres: initdb failed', `${err.stdout ?? ''}${err.stderr ?? ''}`, { cause: e });
      }
      const archive = join(dir, 'pgdata.tar');
      await run('tar', ['-cf', archive, '-C', dir, 'pgdata']);
      await rm(pgdata, { recursive: true, force: true });
      return archive;
    })();
    templates.set(binDir, t);
    t.catch(() => templates.delete(binDir));
  }
  return t;
}

/**
 * A real PostgreSQL server (initdb'd fresh, fsync off) on a loopback port. As root it runs as the
 * `postgres` user. Trust auth, superuser `postgres`, database `postgres`.
 */
export class PostgresServer extends LocalServer {
  readonly name = 'postgres';
  /** Always `127.0.0.1`. */
  readonly host = '127.0.0.1';
  #port: number | undefined;
  readonly #fixedPort: boolean;
  readonly #binDir: string;
  readonly #settings: Record<string, string | number>;
  readonly #owner = postgresUser();
  readonly #ssl: TestCertificates | undefined;
  readonly #hba: string[] | undefined;

  constructor(options?: PostgresServerOptions) {
    super();
    const o = requireOptions('options', options, { port: true, binDir: true, settings: true, ssl: true, hba: true });
    if (o.port !== undefined) this.#port = requireNumber('port', o.port, { integer: true, min: 1, max: 65535 });
    this.#fixedPort = o.port !== undefined;
    this.#binDir = o.binDir === undefined ? findBinDir() : optionalString('binDir', o.binDir, '');
    this.#settings = requireObject('settings', o.settings);
    this.#ssl = o.ssl;
    if (o.hba !== undefined && (!Array.isArray(o.hba) || o.hba.some((l) => typeof l !== 'string' || /[\r\n]/.test(l)))) {
      throw new ConfigError('hba', 'must be a list of single pg_hba.conf lines');
    }
    this.#hba = o.hba;
    this.stopSignal = 'SIGINT'; // "fast" shutdown; SIGTERM waits for clients to leave
    this.gracefulStop = true;
    this.readyTimeoutMs = 30_000;
  }

  /** The port it listens on (after `start()`). */
  get port(): number {
    if (this.#port === undefined) throw new StateError('postgres: not started');
    return this.#port;
  }

  /** `postgres://postgres@127.0.0.1:<port>/postgres` */
  get connectionString(): string {
    return `postgres://postgres@${this.host}:${this.port}/postgres`;
  }

  /** Options for `new pg.Pool(...)`. */
  get connectionConfig(): {
    /** Always `127.0.0.1`. */
    host: string;
    /** The listening port. */
    port: number;
    /** The superuser, `postgres`. */
    user: string;
    /** `postgres`. */
    database: string;
  } {
    return { host: this.host, port: this.port, user: 'postgres', database: 'postgres' };
  }

  protected override runAs(): { uid: number; gid: number } | undefined {
    return this.#owner;
  }

  protected async allocatePorts(): Promise<void> {
    if (!this.#fixedPort) this.#port = await freePort();
  }

  protected override async initDataDir(dir: string): Promise<void> {
    await run('tar', ['-xpf', await template(this.#binDir, this.#owner), '-C', dir]);
    if (this.#hba) {
      const file = join(dir, 'pgdata', 'pg_hba.conf');
      writeFileSync(file, ['local all all trust', `host all postgres ${this.host}/32 trust`, ...this.#hba, ''].join('\n'));
      if (this.#owner) chownSync(file, this.#owner.uid, this.#owner.gid);
    }
  }

  /** The CA a client must trust when the server serves TLS. */
  get ca(): string | undefined {
    return this.#ssl?.ca;
  }

  protected spawnSpec(dir: string): SpawnSpec {
    const settings: Record<string, string | number> = {
      listen_addresses: this.host,
      fsync: 'off',
      synchronous_commit: 'off',
      full_page_writes: 'off',
      max_connections: 200,
      // Segments live in the data dir, so even a SIGKILLed server leaks nothing in /dev/shm.
      dynamic_shared_memory_type: 'mmap',
      ...(this.#ssl ? { ssl: 'on', ssl_cert_file: this.#ssl.certFile, ssl_key_file: this.#ssl.keyFile, ssl_ca_file: this.#ssl.caFile } : {}),
      ...this.#settings,
    };
    return {
      command: join(this.#binDir, 'postgres'),
      args: [
        '-D', join(dir, 'pgdata'), '-p', String(this.port), '-k', dir,
        ...Object.entries(settings).flatMap(([k, v]) => ['-c', `${k}=${v}`]),
      ],
      env: { ...process.env, LC_ALL: 'C.UTF-8' },
      cwd: dir,
      logFile: join(dir, 'server.log'),
      // Backends setsid() out of the postmaster's group: pause and resume must reach them too.
      signalDescendants: true,
    };
  }

  /**
   * Stops for good. A server that was SIGKILLed (and not restarted) leaves its small SysV
   * shared-memory segment behind; the id is in `postmaster.pid`, so remove it.
   */
  override async stop(): Promise<void> {
    let shmId: string | undefined;
    if (!this.running) try {
      const lines = readFileSync(join(this.dir, 'pgdata', 'postmaster.pid'), 'utf8').split('\n');
      shmId = lines[6]?.trim().split(/\s+/)[1];
    } catch {
      shmId = undefined; // not started, or shut down cleanly
    }
    await super.stop();
    if (shmId && /^\d+$/.test(shmId)) await run('ipcrm', ['-m', shmId]).catch(() => undefined);
  }

  protected async probe(): Promise<boolean> {
    const r = await run(join(this.#binDir, 'pg_isready'), ['-q', '-h', this.host, '-p', String(this.port), '-t', '1']).then(
      () => true,
      () => false,
    );
    return r;
  }
}
