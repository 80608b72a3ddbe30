import type { SessionEvents, SessionState } from '../../core/lease-events.js';
import type { Clock } from '../../core/clock.js';
import { ConfigError } from '../../core/errors.js';
import type { Logger } from '../../core/options.js';
import type { ZkAcl, ZkAuthInfo } from './acl.js';

/** The options and events of a ZkSession, and the validation of its connection string. */

/** Connection states a {@link ZkSession} reports (Curator's ConnectionState): every session's {@link SessionState}. */
export type ZkConnectionState = SessionState;

/**
 * How connection trouble reaches holders' signals.
 * - `standard`: SUSPENDED counts as loss: every lease's signal aborts at once (Curator's default).
 * - `session`: only LOST counts; a holder keeps its lease through SUSPENDED, but its signal still
 *   aborts at `lastServerContact + sessionTimeout − safetyMarginMs` on the monotonic clock.
 */
export type ZkErrorPolicy = 'standard' | 'session';

/** Options of {@link ZkSession.create}. */
export interface ZkSessionOptions {
  /** `host:port[,host:port…][/chroot]`. */
  connectionString: string;
  /**
   * The session timeout to request, in ms (ZooKeeper's TTL); the server may grant another within
   * its min/max (see `ttlMs` on the session). @default 10000
   */
  ttlMs?: number;
  /** @default 'standard' */
  policy?: ZkErrorPolicy;
  /**
   * How long before the server could expire the session a holder stops (the local deadline,
   * `lastServerContact + ttl − safetyMarginMs`). Must be > 0 and < 2/3 of the TTL. @default ttlMs / 5
   */
  safetyMarginMs?: number;
  /**
   * How long `create()` waits for the first connection, and every recipe call for a connection
   * (after a disconnect), before it rejects with StoreUnavailableError. @default 15000
   */
  connectTimeoutMs?: number;
  /**
   * How long one request (create, read, delete) waits for its reply while connected. Past it the
   * link is silent (ZooKeeper answers in order): the session drops it and reconnects, as its
   * heartbeat would at 2/3 of the TTL; `tryAcquire`, `holder`, `leader` and `participants` reject
   * with StoreUnavailableError, waits go on as after any connection loss. @default 5000
   */
  callTimeoutMs?: number;
  /** Pause between connection attempts once every server was tried. @default 100 */
  spinDelayMs?: number;
  /** @default silent */
  logger?: Logger;
  /** @default the monotonic clock */
  clock?: Clock;
  /**
   * Credentials the session presents on every connection, e.g.
   * `[{ scheme: 'digest', auth: 'user:password' }]`. Never logged. They protect nothing by
   * themselves: without `acl` (here or in a recipe's options) every node tenure creates is
   * `world:anyone`, which any client may list, delete or create under; the session warns
   * through its logger when given `authInfo` without `acl`.
   */
  authInfo?: ZkAuthInfo[];
  /**
   * The ACL of every node tenure's recipes create on this session (Curator's ACLProvider), e.g.
   * `[digestAcl('user', 'password')]`. @default open to everyone (`world:anyone`)
   */
  acl?: ZkAcl[];
}

/** @deprecated the same map as every session's: {@link SessionEvents}. */
export type ZkSessionEvents = SessionEvents;

/**
 * Validates a connection string, `host:port[,host:port…][/chroot]`, so a bad port is a
 * ConfigError here rather than an uncaught ERR_SOCKET_BAD_PORT in the client's socket code.
 */
export function requireConnectionString(value: unknown): string {
  const hint = "must be 'host:port[,host:port…][/chroot]'";
  if (typeof value !== 'string' || value.length === 0 || value.length > 4096) throw new ConfigError('connectionString', hint);
  const slash = value.indexOf('/');
  const hosts = slash < 0 ? value : value.slice(0, slash);
  for (const h of hosts.split(',')) {
    const m = /^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+):(\d{1,5})$/.exec(h);
    if (!m) throw new ConfigError('connectionString', `${hint}, got ${JSON.stringify(h)}`);
    const port = Number(m[2]);
    if (port < 1 || port > 65535) throw new ConfigError('connectionString', `port must be 1–65535, got ${port}`);
  }
  if (slash >= 0 && !/^\/\S*$/.test(value.slice(slash))) throw new ConfigError('connectionString', `${hint}: bad chroot`);
  return value;
}
