import type { Clock } from '../../core/clock.js';
import { ConfigError } from '../../core/errors.js';
import type { Logger } from '../../core/options.js';
import type { ZkAcl, ZkAuthInfo } from './acl.js';

/** The options and events of a ZkSession, and the validation of its connection string. */

/** Connection states a {@link ZkSession} reports (Curator's ConnectionState). */
export type ZkConnectionState = 'CONNECTED' | 'SUSPENDED' | 'RECONNECTED' | 'LOST' | 'READ_ONLY';

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
  /** Pause between connection attempts once every server was tried. @default 100 */
  spinDelayMs?: number;
  /** @default silent */
  logger?: Logger;
  /** @default the monotonic clock */
  clock?: Clock;
  /**
   * Credentials the session presents on every connection, e.g.
   * `[{ scheme: 'digest', auth: 'user:password' }]`. Never logged.
   */
  authInfo?: ZkAuthInfo[];
  /**
   * The ACL of every node tenure's recipes create on this session (Curator's ACLProvider), e.g.
   * `[digestAcl('user', 'password')]`. @default open to everyone (`world:anyone`)
   */
  acl?: ZkAcl[];
}

/**
 * Connection-state events. Each edge fires `state` and the event named after the state. By the
 * time a handler runs, the epoch signal has already aborted for SUSPENDED (standard policy) and
 * LOST. Handlers must not throw.
 */
export interface ZkSessionEvents {
  /** Every connection-state edge, in order. */
  state: (state: ZkConnectionState) => void;
  /** The first connection of a (new) ZooKeeper session. */
  CONNECTED: () => void;
  /** The connection dropped; the session may still be alive. */
  SUSPENDED: () => void;
  /** Connected again to the same session. */
  RECONNECTED: () => void;
  /** The session expired (or its local deadline passed); a new one is being made. */
  LOST: () => void;
  /** Connected to a read-only server (node-zookeeper-client 1.1.3 never asks for one). */
  READ_ONLY: () => void;
}

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
