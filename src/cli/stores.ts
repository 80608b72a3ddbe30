import type { Candidate } from '../core/candidate.js';
import { ConfigError, MissingPeerError } from '../core/errors.js';
import type { Lease } from '../core/lease.js';
import type { WaitOptions } from '../core/options.js';
import { commonjsExports, importPeer } from '../core/peer.js';
import type { ZkAcl } from '../recipes/zk/acl.js';
import type { AclEntry, BackendName, SslMode } from './args.js';
import type { StoreFlags } from './common.js';
import { readPassword, readPem, redact } from './secrets.js';

/** A mutex as the CLI uses it: every backend's lock recipe has this shape. */
export interface CliLock {
  acquire(options?: WaitOptions): Promise<Lease>;
  close(): Promise<void>;
}

/** One connection to a store, and the recipes the CLI builds on it. */
export interface Store {
  /** An election (the backend's Candidate) on `name`. */
  candidate(name: string, id: string): Candidate;
  /** A mutex on `name`. */
  lock(name: string, id: string): CliLock;
  /** Closes the connection (for etcd, revokes the session's lease). */
  close(): Promise<void>;
}

export interface StoreOptions {
  ttlMs: number;
  /** How long before the lease could expire the term ends (`run`, `lock`: --grace and its bound). @default TTL/5 */
  safetyMarginMs?: number;
  /** Hears warnings (a password file others can read, a password on the command line). */
  warn?: (text: string) => void;
}

/** Which CLI flag a recipe's option comes from, so a ConfigError names what the user typed. */
const FLAG_OF: Record<string, string> = {
  ttlMs: '--ttl',
  safetyMarginMs: '--ttl',
  hosts: '--endpoints',
  connectionString: '--endpoints',
  name: '--name',
  path: '--name',
  id: '--id',
  callTimeoutMs: '--call-timeout',
  connectTimeoutMs: '--call-timeout',
  user: '--user',
  schema: '--schema',
};

/** Rewrites a recipe's ConfigError (and a missing client package) in the CLI's own words, with no secret in it. */
export function asFlagError(e: unknown, backend: BackendName): unknown {
  if (e instanceof ConfigError && FLAG_OF[e.field]) return new ConfigError(FLAG_OF[e.field]!, redact(e.message.slice(e.field.length + 2)), { cause: e });
  if (e instanceof MissingPeerError) return new ConfigError('--backend', `${backend} needs the package ${e.packageName} (npm install ${e.packageName})`, { cause: e });
  return e;
}

function single(backend: BackendName, endpoints: string[]): string {
  if (endpoints.length !== 1) throw new ConfigError('--endpoints', `${backend} takes one endpoint (a single node), got ${endpoints.length}`);
  return endpoints[0]!;
}

function hostPort(endpoint: string): { host: string; port: number } | undefined {
  const m = /^([^:/]+):(\d{1,5})$/.exec(endpoint);
  return m ? { host: m[1]!, port: Number(m[2]) } : undefined;
}

/** ZooKeeper names are paths: `billing` becomes `/billing`. */
const zkPath = (name: string): string => (name.startsWith('/') ? name : `/${name}`);

/** The flags that only one backend takes. */
const ONLY: [keyof StoreFlags, string, BackendName][] = [
  ['acl', '--acl', 'zk'],
  ['sslmode', '--sslmode', 'postgres'],
  ['schema', '--schema', 'postgres'],
];

/** The TLS files (PEM text), when any TLS flag is given. */
interface TlsFiles {
  ca?: string;
  cert?: string;
  key?: string;
}

/** Credentials and TLS from the flags, checked against the backend; the password read (never from argv). */
interface Security {
  user?: string;
  password?: string;
  tls?: TlsFiles;
}

function security(flags: StoreFlags, warn: (text: string) => void): Security {
  for (const [field, flag, only] of ONLY) if (flags[field] !== undefined && flags.backend !== only) throw new ConfigError(flag, `is for --backend ${only} only`);
  if ((flags.cert === undefined) !== (flags.key === undefined)) throw new ConfigError(flags.cert === undefined ? '--key' : '--cert', 'give --cert and --key together (the client certificate and its key)');
  const files: [string, string | undefined, keyof TlsFiles][] = [['--cacert', flags.cacert, 'ca'], ['--cert', flags.cert, 'cert'], ['--key', flags.key, 'key']];
  let tls: TlsFiles | undefined;
  for (const [flag, file, field] of files) if (file !== undefined) (tls ??= {})[field] = readPem(flag, file);
  const password = readPassword(flags.passwordFile, warn);
  return { ...(flags.user !== undefined ? { user: flags.user } : {}), ...(password !== undefined ? { password } : {}), ...(tls ? { tls } : {}) };
}

function needPassword(backend: BackendName, sec: Security): string {
  if (sec.password === undefined) throw new ConfigError('--user', `${backend} needs the user's password (--password-file or TENURE_PASSWORD)`);
  return sec.password;
}

function noTwice(what: string, inUrl: boolean, inFlags: boolean, flag: string): void {
  if (inUrl && inFlags) throw new ConfigError(flag, `the ${what} is given twice: in --endpoints and by ${flag}`);
}

/**
 * Connects to the store. Each backend's entry point is loaded only here, so `tenure --help` and
 * the backends you do not use need none of the other client packages.
 */
export async function openStore(flags: StoreFlags, o: StoreOptions): Promise<Store> {
  try {
    return await open(flags, o);
  } catch (e) {
    throw asFlagError(e, flags.backend);
  }
}

async function open(flags: StoreFlags, o: StoreOptions): Promise<Store> {
  const { backend, endpoints } = flags;
  const callTimeoutMs = flags.callTimeout;
  const warn = o.warn ?? (() => undefined);
  const sec = security(flags, warn);
  switch (backend) {
    case 'etcd': {
      const { EtcdSession, EtcdElection, EtcdMutex, createEtcdClient } = await import('../recipes/etcd/index.js');
      const { callWithin } = await import('../recipes/etcd/client.js');
      const hosts = endpoints.map((e) => (/^[a-z]+:\/\//.test(e) ? e : `${sec.tls ? 'https' : 'http'}://${e}`));
      if (sec.tls && hosts.some((h) => h.startsWith('http://'))) throw new ConfigError('--endpoints', 'TLS flags with an http:// endpoint: use https://');
      if (sec.password !== undefined && sec.user === undefined) throw new ConfigError('--user', 'a password was given (--password-file or TENURE_PASSWORD) but no --user');
      const t = sec.tls;
      const client = await createEtcdClient({
        hosts,
        etcd3: {
          ...(t ? { credentials: { rootCertificate: t.ca === undefined ? (undefined as unknown as Buffer) : Buffer.from(t.ca), ...(t.cert ? { certChain: Buffer.from(t.cert), privateKey: Buffer.from(t.key!) } : {}) } } : {}),
          ...(sec.user !== undefined ? { auth: { username: sec.user, password: needPassword(backend, sec), callOptions: () => callWithin(callTimeoutMs) } } : {}),
        },
      });
      let session;
      try {
        session = await EtcdSession.create({ client, ttlMs: o.ttlMs, safetyMarginMs: o.safetyMarginMs, callTimeoutMs });
      } catch (e) {
        client.close();
        throw e;
      }
      return {
        candidate: (name, id) => new EtcdElection(session, name, { id }),
        lock: (name) => new EtcdMutex(session, name),
        close: () => session.close().finally(() => client.close()),
      };
    }
    case 'zk': {
      if (sec.tls) throw new ConfigError(flags.cacert !== undefined ? '--cacert' : '--cert', 'ZooKeeper takes no TLS here (node-zookeeper-client has none; put a TLS tunnel in front of the secure port)');
      const { ZkSession, LeaderLatch, InterProcessMutex, digestAcl } = await import('../recipes/zk/index.js');
      const user = sec.user;
      const password = user === undefined ? undefined : needPassword(backend, sec);
      if (sec.password !== undefined && user === undefined) throw new ConfigError('--user', 'a password was given (--password-file or TENURE_PASSWORD) but no --user');
      const acl = (flags.acl ?? (user === undefined ? undefined : ['creator'])) as AclEntry[] | undefined;
      const acls = acl?.map((a): ZkAcl => {
        if (a !== 'creator') return a;
        if (user === undefined) throw new ConfigError('--acl', "'creator' needs --user (the digest user the nodes are for)");
        return digestAcl(user, password!);
      });
      const session = await ZkSession.create({
        connectionString: endpoints.join(','),
        ttlMs: o.ttlMs,
        safetyMarginMs: o.safetyMarginMs,
        connectTimeoutMs: callTimeoutMs,
        callTimeoutMs,
        ...(user !== undefined ? { authInfo: [{ scheme: 'digest', auth: `${user}:${password!}` }] } : {}),
        ...(acls ? { acl: acls } : {}),
      });
      if (o.safetyMarginMs !== undefined && o.safetyMarginMs >= (session.ttlMs * 2) / 3) {
        // The server granted a shorter session than asked (its maxSessionTimeout): --grace no longer fits.
        await session.close();
        throw new ConfigError('--ttl', `the server granted a ${session.ttlMs} ms session (its maxSessionTimeout), too short for --grace; use a shorter --grace`);
      }
      return {
        candidate: (name, id) => new LeaderLatch(session, zkPath(name), { id }),
        lock: (name, id) => new InterProcessMutex(session, zkPath(name), { id }),
        close: () => session.close(),
      };
    }
    case 'redis': {
      const endpoint = single(backend, endpoints);
      const { RedisElection, RedisLock } = await import('../recipes/redis/index.js');
      const { Redis } = await importPeer('tenure/redis', 'ioredis', () => import('ioredis'));
      const at = hostPort(endpoint);
      if (!at && !/^rediss?:\/\//.test(endpoint)) throw new ConfigError('--endpoints', `'${redact(endpoint)}' is not host:port or a redis:// URL`);
      if (!at) {
        const url = parseUrl(endpoint);
        noTwice('user', url.username !== '', sec.user !== undefined, '--user');
        noTwice('password', url.password !== '', sec.password !== undefined, flags.passwordFile !== undefined ? '--password-file' : 'TENURE_PASSWORD');
      }
      const options = {
        lazyConnect: true,
        connectTimeout: callTimeoutMs,
        ...(sec.user !== undefined ? { username: sec.user } : {}),
        ...(sec.password !== undefined ? { password: sec.password } : {}),
        ...(sec.tls ? { tls: { ...sec.tls } } : {}),
      };
      const redis = at ? new Redis({ ...at, ...options }) : new Redis(endpoint, options);
      redis.on('error', () => undefined); // every call is bounded and reports its own failure
      const lockOptions = { ttlMs: o.ttlMs, safetyMarginMs: o.safetyMarginMs, callTimeoutMs };
      return {
        candidate: (name, id) => new RedisElection(redis, name, { ...lockOptions, id }),
        lock: (name, id) => new RedisLock(redis, name, { ...lockOptions, id }),
        close: async () => void redis.disconnect(),
      };
    }
    case 'postgres': {
      const endpoint = single(backend, endpoints);
      const { PgElection, PgSessionLock } = await import('../recipes/postgres/index.js');
      const pg = commonjsExports(await importPeer('tenure/postgres', 'pg', () => import('pg')));
      // User, password and database come from the flags, the URL, or PGUSER, PGPASSWORD, PGDATABASE.
      const config = pgConfig(endpoint, flags, sec);
      const pool = new pg.Pool({ ...config, connectionTimeoutMillis: callTimeoutMs });
      pool.on('error', () => undefined);
      const lockOptions = { ttlMs: o.ttlMs, safetyMarginMs: o.safetyMarginMs, callTimeoutMs, ...(flags.schema !== undefined ? { schema: flags.schema } : {}) };
      return {
        candidate: (name, id) => new PgElection(pool, name, { ...lockOptions, id }),
        lock: (name, id) => new PgSessionLock(pool, name, { ...lockOptions, id }),
        close: () => pool.end(),
      };
    }
  }
}

function parseUrl(endpoint: string): URL {
  try {
    return new URL(endpoint);
  } catch {
    throw new ConfigError('--endpoints', `'${redact(endpoint)}' is not a valid URL`);
  }
}

/** The TLS settings a `postgres://` URL may carry, as libpq spells them. */
const PG_TLS_PARAMS = ['ssl', 'sslmode', 'sslrootcert', 'sslcert', 'sslkey'];

/**
 * The pool's connection settings. A URL is read here rather than given to pg as
 * `connectionString`, whose fields would override the flags (an absent user becoming '').
 */
function pgConfig(endpoint: string, flags: StoreFlags, sec: Security): Record<string, unknown> {
  const at = hostPort(endpoint);
  if (!at && !/^postgres(ql)?:\/\//.test(endpoint)) throw new ConfigError('--endpoints', `'${redact(endpoint)}' is not host:port or a postgres:// URL`);
  const config: Record<string, unknown> = at ? { ...at } : {};
  if (!at) {
    const url = parseUrl(endpoint);
    const decode = (s: string): string | undefined => (s === '' ? undefined : decodeURIComponent(s));
    const params = Object.fromEntries(url.searchParams);
    const tlsInUrl = PG_TLS_PARAMS.some((p) => p in params);
    noTwice('user', url.username !== '', sec.user !== undefined, '--user');
    noTwice('password', url.password !== '' || 'password' in params, sec.password !== undefined, flags.passwordFile !== undefined ? '--password-file' : 'TENURE_PASSWORD');
    noTwice('TLS setting', tlsInUrl, flags.sslmode !== undefined || sec.tls !== undefined, flags.sslmode !== undefined ? '--sslmode' : '--cacert/--cert');
    Object.assign(config, params, {
      ...(url.hostname ? { host: decode(url.hostname) } : {}),
      ...(url.port ? { port: Number(url.port) } : {}),
      ...(url.pathname.length > 1 ? { database: decode(url.pathname.slice(1)) } : {}),
      ...(url.username ? { user: decode(url.username) } : {}),
      ...(url.password ? { password: decode(url.password) } : {}),
    });
    if ('host' in params) config.host = params.host; // ?host=/run/postgresql (a socket dir)
    if (tlsInUrl) {
      for (const p of PG_TLS_PARAMS) delete config[p];
      const tls: TlsFiles = {};
      if (params.sslrootcert) tls.ca = readPem('sslrootcert', params.sslrootcert);
      if (params.sslcert) tls.cert = readPem('sslcert', params.sslcert);
      if (params.sslkey) tls.key = readPem('sslkey', params.sslkey);
      const mode = params.sslmode ?? (params.ssl === undefined ? undefined : /^(0|false)$/.test(params.ssl) ? 'disable' : 'verify-full');
      const ssl = pgSsl(mode as SslMode | undefined, Object.keys(tls).length ? tls : undefined, 'sslmode');
      if (ssl !== undefined) config.ssl = ssl;
    }
  }
  if (sec.user !== undefined) config.user = sec.user;
  if (sec.password !== undefined) config.password = sec.password;
  const ssl = pgSsl(flags.sslmode, sec.tls, '--sslmode');
  if (ssl !== undefined) config.ssl = ssl;
  return config;
}

/**
 * pg's `ssl` for an sslmode as libpq defines it: `require` encrypts without checking the server
 * (unless a CA is given: then as `verify-ca`), `verify-ca` checks the chain, `verify-full` the
 * chain and the host name. TLS files without a mode mean `verify-full`. Undefined: pg decides
 * (PGSSLMODE).
 */
function pgSsl(mode: SslMode | undefined, tls: TlsFiles | undefined, flag: string): false | Record<string, unknown> | undefined {
  if (mode === undefined && tls === undefined) return undefined;
  const m = mode ?? 'verify-full';
  if (!['disable', 'require', 'verify-ca', 'verify-full'].includes(m)) throw new ConfigError(flag, `'${m}' is not one of disable, require, verify-ca, verify-full (tenure never falls back to plaintext)`);
  if (m === 'disable') {
    if (tls) throw new ConfigError(flag, "'disable' with TLS files (--cacert, --cert)");
    return false;
  }
  const files = { ...(tls?.ca ? { ca: tls.ca } : {}), ...(tls?.cert ? { cert: tls.cert, key: tls.key } : {}) };
  if (m === 'require' && !tls?.ca) return { ...files, rejectUnauthorized: false };
  if (m === 'verify-full') return files;
  return { ...files, checkServerIdentity: () => undefined }; // verify-ca (or require with a CA)
}
