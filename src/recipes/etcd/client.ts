import type { Etcd3, IOptions } from 'etcd3';
import { ExponentialBackoff, handleWhen, noop, retry } from 'cockatiel';
import { ConfigError } from '../../core/errors.js';
import { optionalNumber, requireObject, requireOptions } from '../../core/validate.js';
import { etcd3, loadEtcd3 } from './peer.js';
import { closeWatchStream } from './watch-stream.js';

/**
 * The etcd3 client with fault handling chosen for leases, not for throughput.
 *
 * etcd3's defaults put a circuit breaker on each host that opens for 5 s after 3 failures: a 1 s
 * raft election or link reset then becomes a ~6 s outage, longer than a short lease TTL, and a
 * leader that could have kept its lease loses it. tenure's client instead
 * - has no per-host breaker (cockatiel's no-op policy: a host that failed is simply tried again),
 * - retries a failed call on another host a few times through tenure's one backoff policy
 *   (cockatiel's jittered exponential backoff; every tenure write is guarded by a compare, so a
 *   retry cannot do harm),
 * - reconnects gRPC channels within 100–1000 ms and watch streams within 5–1000 ms instead of
 *   up to 30 s.
 * The session's local deadline, not the client, decides when a lease may be lost.
 */

/** gRPC call options as the etcd3 client's RPC methods take them. */
export type CallOptions = NonNullable<Parameters<Etcd3['kv']['range']>[1]>;

/** Options of {@link createEtcdClient}. */
export interface EtcdClientOptions {
  /** etcd endpoints, e.g. `['http://127.0.0.1:2379']`. */
  hosts: string | string[];
  /** Attempts per call across hosts on a recoverable error. @default 3 */
  maxAttempts?: number;
  /** First pause between attempts in ms (jittered, doubling). @default 50 */
  retryDelayMs?: number;
  /** Extra options passed to the etcd3 client (hosts and faultHandling are tenure's). */
  etcd3?: Omit<IOptions, 'hosts' | 'faultHandling'>;
}

const endpoints = new WeakMap<Etcd3, string>();

/** The endpoints a client talks to, for error messages (never with credentials). */
export function endpointOf(client: Etcd3): string | undefined {
  return endpoints.get(client) ?? describeHosts((client as unknown as { options?: { hosts?: string | string[] } }).options?.hosts);
}

function describeHosts(hosts: string | string[] | undefined): string | undefined {
  if (hosts === undefined) return undefined;
  return (Array.isArray(hosts) ? hosts : [hosts]).map((h) => h.replace(/\/\/[^@/]*@/, '//')).join(',');
}

/**
 * Creates an etcd3 client configured for leases (see the module note), loading the `etcd3`
 * package first (a MissingPeerError naming it when it is not installed). Close it with
 * `client.close()` when done.
 */
export async function createEtcdClient(options: EtcdClientOptions): Promise<Etcd3> {
  await loadEtcd3();
  return newEtcdClient(options);
}

/** {@link createEtcdClient} once `etcd3` is loaded (EtcdSession's constructor, after its `create()` loaded it). */
export function newEtcdClient(options: EtcdClientOptions): Etcd3 {
  const o = requireOptions('options', options, { hosts: true, maxAttempts: true, retryDelayMs: true, etcd3: true });
  const hosts = o.hosts;
  if (!(typeof hosts === 'string' ? hosts.length > 0 : Array.isArray(hosts) && hosts.length > 0 && hosts.every((h) => typeof h === 'string' && h.length > 0))) {
    throw new ConfigError('hosts', 'must be a non-empty endpoint or list of endpoints');
  }
  const maxAttempts = optionalNumber('maxAttempts', o.maxAttempts, 3, { integer: true, min: 1, max: 20 });
  const retryDelayMs = optionalNumber('retryDelayMs', o.retryDelayMs, 50, { min: 1, max: 10_000 });
  const extra = requireObject('etcd3', o.etcd3); // etcd3's own options: not ours to check
  const client = new etcd3.Etcd3({
    ...extra,
    hosts,
    grpcOptions: {
      'grpc.initial_reconnect_backoff_ms': 100,
      'grpc.min_reconnect_backoff_ms': 100,
      'grpc.max_reconnect_backoff_ms': 1000,
      ...extra.grpcOptions,
    },
    faultHandling: {
      host: () => noop,
      global: retry(handleWhen(etcd3.isRecoverableError), { maxAttempts: maxAttempts - 1, backoff: new ExponentialBackoff({ initialDelay: retryDelayMs, maxDelay: 1000 }) }),
      // etcd3's own watch stream (a user's watchers on this client; tenure's recipes watch on a
      // stream of their own, watch-stream.ts) is torn down when its last watcher is cancelled, and
      // a watcher attached before the cancel lands meets the stream's CANCELLED error and waits
      // one backoff before re-attaching: 5 ms keeps that race cheap and still backs off to 1 s on
      // a real outage.
      watchBackoff: new ExponentialBackoff({ initialDelay: 5, maxDelay: 1000 }).next(),
    },
  });
  endpoints.set(client, describeHosts(hosts)!);
  // etcd3's close() closes the gRPC channels but leaves a watch stream open until the server
  // confirms the last watcher's cancel — on a blackholed link, never, and the open HTTP/2 session
  // keeps the process alive. Closing a tenure client cancels the streams too (etcd3's, for a
  // user's own watchers, and tenure's: watch-stream.ts).
  const close = client.close.bind(client);
  client.close = () => {
    closeWatchStream(client);
    try {
      (client as unknown as { watchManager?: { stream?: { cancel(): void } } }).watchManager?.stream?.cancel();
    } catch {
      // no stream
    }
    close();
  };
  return client;
}

/**
 * gRPC call options with a deadline `ms` from now. gRPC compares deadlines with the wall clock
 * (`Date.now()`), so this one place reads it; no lease math depends on it.
 */
export function callWithin(ms: number): CallOptions {
  // eslint-disable-next-line no-restricted-properties -- gRPC deadlines are wall-clock instants
  return { deadline: Date.now() + ms };
}
