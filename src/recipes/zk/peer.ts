import { loadPeer } from '../../core/peer.js';

/** The `node-zookeeper-client` package, loaded so that its absence is a MissingPeerError naming it. */
export const zookeeper = loadPeer<typeof import('node-zookeeper-client')>('tenure/zk', 'node-zookeeper-client');

/** Its protocol module (untyped): ops.ts builds a create request itself to read the reply's zxid. */
export const zookeeperProtocol = loadPeer<unknown>('tenure/zk', 'node-zookeeper-client/lib/jute/index.js');
