/**
 * Debian's etcdctl (etcd-client 3.4) as a real peer: `etcdctl lock` and `etcdctl elect` are Go's
 * `concurrency` Mutex and Election, on the key layout tenure's EtcdMutex / EtcdElection use.
 * SIGINT makes etcdctl unlock / resign and exit; SIGKILL is a crash (its lease then expires).
 */
import { LineProcess } from './line-process.js';

const etcdctl = (endpoints: string[], args: string[]): LineProcess => new LineProcess('etcdctl', [`--endpoints=${endpoints.join(',')}`, ...args], { ...process.env, ETCDCTL_API: '3' });

/** `etcdctl lock --ttl N name`: prints its key `name/<lease hex>` once it holds the lock. */
export function etcdctlLock(endpoints: string[], name: string, ttlSeconds: number): LineProcess {
  return etcdctl(endpoints, ['lock', `--ttl=${ttlSeconds}`, name]);
}

/**
 * `etcdctl elect name proposal`: prints its key and then the proposal once elected. (etcdctl 3.4
 * has no --ttl for elect: its session TTL is Go's default, 60 s.)
 */
export function etcdctlElect(endpoints: string[], name: string, proposal: string): LineProcess {
  return etcdctl(endpoints, ['elect', name, proposal]);
}

/** `etcdctl elect -l name`: prints the leader's key and value, and again on every change. */
export function etcdctlObserve(endpoints: string[], name: string): LineProcess {
  return etcdctl(endpoints, ['elect', '-l', name]);
}

/** Resolves with the line and its arrival time once `peer` printed a key under `name/` (it holds / leads). */
export function heldKey(peer: LineProcess, name: string, timeoutMs = 20_000, from = 0): Promise<{ text: string; at: bigint; index: number }> {
  return peer.waitForLine((l) => l.startsWith(`${name}/`), timeoutMs, from);
}
