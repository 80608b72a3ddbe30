import { Etcd3, EtcdAuthenticationFailedError, EtcdPermissionDeniedError, EtcdRoleNotGrantedError, isRecoverableError, type IOptions } from 'etcd3';
import { ConfigError, PermissionDeniedError } from '../../core/errors.js';
import { optionalNumber, requireOptions } from '../../core/validate.js';

/**
 * The etcd3 client with fault handling chosen for leases, not for throughput.
 *
 * etcd3's defaults put a circuit breaker on each host that opens for 5 s after 3 failures: a 1 s
 * raft election or link reset then becomes a ~6 s outage, longer than a short lease TTL, and a
 * leader that could have kept its lease loses it. tenure's client instead
 * - has no per-host breaker (a host that failed is simply tried again on the next call),
 * - retries a failed call on another host a few times with a short pause (every tenure write is
 *   guarded by a compare, so a retry cannot do harm),
 * - reconnects gRPC channels and watch streams within 100–1000 ms instead of up to 30 s.
 * The session's local deadline, not the client, decides when a lease may be lost.
 */

/** gRPC call options as the etcd3 client's RPC methods take them. */
export type CallOptions = NonNullable<Parameters<Etcd3['kv']['range']>[1]>;
type FaultHandling = NonNullable<IOptions['faultHandling']>;
type HostPolicy = ReturnType<NonNullable<FaultHandling['host']>>;
type WatchBackoff = NonNullable<FaultHandling['watchBackoff']>;

export interface EtcdClientOptions {
  /** etcd endpoints, e.g. `['http://127.0.0.1:2379']`. */
  hosts: string | string[];
  /** Attempts per call across hosts on a recoverable error. @default 3 */
  maxAttempts?: number;
  /** Pause between attempts in ms. @default 50 */
  retryDelayMs?: number;
  /** Extra options passed to the etcd3 client (hosts and faultHandling are tenure's). */
  etcd3?: Omit<IOptions, 'hosts' | 'faultHandling'>;
}

/** A pass-through policy: no circuit breaker per host. */
function passThrough(): HostPolicy {
  return { execute: (fn: (ctx: unknown) => unknown) => Promise.resolve().then(() => fn({ signal: new AbortController().signal })) } as unknown as HostPolicy;
}

/** Retries recoverable errors `maxAttempts` times in total, `delayMs` apart. */
function retrying(maxAttempts: number, delayMs: number): FaultHandling['global'] {
  return {
    async execute(fn: (ctx: unknown) => unknown) {
      for (let attempt = 1; ; attempt++) {
        try {
          return await fn({ signal: new AbortController().signal, attempt });
        } catch (e) {
          if (attempt >= maxAttempts || !(e instanceof Error) || !isRecoverableError(e)) throw e;
          await new Promise((r) => setTimeout(r, delayMs));
        }
      }
    },
  } as unknown as FaultHandling['global'];
}

/** Reconnect a watch stream after 100 ms, doubling up to 1 s. */
function watchBackoff(duration = 100): WatchBackoff {
  return { duration, next: () => watchBackoff(Math.min(1000, duration * 2)) } as unknown as WatchBackoff;
}

/**
 * Creates an etcd3 client configured for leases (see the module note). Close it with
 * `client.close()` when done.
 */
export function createEtcdClient(options: EtcdClientOptions): Etcd3 {
  const o = requireOptions('options', options);
  const hosts = o.hosts;
  if (!(typeof hosts === 'string' ? hosts.length > 0 : Array.isArray(hosts) && hosts.length > 0 && hosts.every((h) => typeof h === 'string' && h.length > 0))) {
    throw new ConfigError('hosts', 'must be a non-empty endpoint or list of endpoints');
  }
  const maxAttempts = optionalNumber('maxAttempts', o.maxAttempts, 3, { integer: true, min: 1, max: 20 });
  const retryDelayMs = optionalNumber('retryDelayMs', o.retryDelayMs, 50, { min: 0, max: 10_000 });
  const extra = requireOptions('etcd3', o.etcd3);
  return new Etcd3({
    ...extra,
    hosts,
    grpcOptions: {
      'grpc.initial_reconnect_backoff_ms': 100,
      'grpc.min_reconnect_backoff_ms': 100,
      'grpc.max_reconnect_backoff_ms': 1000,
      ...extra.grpcOptions,
    },
    faultHandling: { host: passThrough, global: retrying(maxAttempts, retryDelayMs), watchBackoff: watchBackoff() },
  });
}

/** etcd's refusals for missing rights; the client raises some as plain gRPC errors. */
const DENIED = /etcdserver: (permission denied|authentication failed|user name (is )?empty|role is not granted|invalid auth token)/i;

/**
 * etcd's answer for missing rights (a role without the key range, a wrong password) as a
 * {@link PermissionDeniedError}; any other error as it is. Such an error can never succeed on
 * retry: before this, the queue retried it as a transport error until the caller's timeout (an
 * endless wait without one). etcd's message names the user or the refusal, never a password.
 */
export function mapEtcdError(e: unknown): unknown {
  if (e instanceof PermissionDeniedError) return e;
  const known = e instanceof EtcdPermissionDeniedError || e instanceof EtcdAuthenticationFailedError || e instanceof EtcdRoleNotGrantedError;
  if (!known && !(e instanceof Error && DENIED.test(e.message))) return e;
  return new PermissionDeniedError('etcd', (e as Error).message.replace(/^\d+ [A-Z_]+: /, ''), { cause: e });
}

/**
 * gRPC call options with a deadline `ms` from now. gRPC compares deadlines with the wall clock
 * (`Date.now()`), so this one place reads it; no lease math depends on it.
 */
export function callWithin(ms: number): CallOptions {
  // eslint-disable-next-line no-restricted-properties -- gRPC deadlines are wall-clock instants
  return { deadline: Date.now() + ms };
}
