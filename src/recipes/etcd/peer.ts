import { commonjsExports, importPeer } from '../../core/peer.js';

type Etcd3Module = typeof import('etcd3');

/**
 * The `etcd3` package, set by {@link loadEtcd3} (an ES live binding): every value of it that the
 * recipes use runs after `EtcdSession.create()`, which loads it first.
 */
export let etcd3: Etcd3Module;

/** Loads `etcd3` once (a MissingPeerError naming it when it is not installed). */
export async function loadEtcd3(): Promise<Etcd3Module> {
  etcd3 ??= commonjsExports(await importPeer('tenure/etcd', 'etcd3', () => import('etcd3')));
  return etcd3;
}
