import { loadPeer } from '../../core/peer.js';

/** The `etcd3` package, loaded so that its absence is a MissingPeerError naming it. */
export const etcd3 = loadPeer<typeof import('etcd3')>('tenure/etcd', 'etcd3');
