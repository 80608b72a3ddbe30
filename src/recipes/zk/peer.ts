import { commonjsExports, importPeer } from '../../core/peer.js';

type ZookeeperModule = typeof import('node-zookeeper-client');

/**
 * The `node-zookeeper-client` package, set by {@link loadZookeeper} (an ES live binding): every
 * value of it that the recipes use runs after `ZkSession.create()`, which loads it first.
 */
export let zookeeper: ZookeeperModule;

/** Its protocol module (untyped): ops.ts builds a create request itself to read the reply's zxid. */
export let zookeeperProtocol: unknown;

/** Loads `node-zookeeper-client` once (a MissingPeerError naming it when it is not installed). */
export async function loadZookeeper(): Promise<ZookeeperModule> {
  if (zookeeper) return zookeeper;
  const client = commonjsExports(await importPeer('tenure/zk', 'node-zookeeper-client', () => import('node-zookeeper-client')));
  // @ts-expect-error -- the client's internal protocol module has no types
  zookeeperProtocol = commonjsExports(await import('node-zookeeper-client/lib/jute/index.js'));
  tolerateNewerReplyCodes(client);
  zookeeper = client;
  return zookeeper;
}

/** Reply codes ZooKeeper 3.5+ sends that node-zookeeper-client 1.1 does not know, by name. */
const NEWER_CODES: Record<number, string> = {
  [-12]: 'UNKNOWN_SESSION',
  [-13]: 'NEW_CONFIG_NO_QUORUM',
  [-14]: 'RECONFIG_IN_PROGRESS',
  [-118]: 'SESSION_MOVED',
  [-119]: 'NOT_READ_ONLY',
  [-120]: 'EPHEMERAL_ON_LOCAL_SESSION',
  [-121]: 'NO_WATCHER',
  [-122]: 'REQUEST_TIMEOUT',
  [-123]: 'RECONFIG_DISABLED',
  [-124]: 'SESSION_CLOSED_REQUIRE_SASL_AUTH',
  [-125]: 'QUOTA_EXCEEDED',
  [-127]: 'THROTTLED_OP',
};

/**
 * The client builds each failed reply's exception with `Exception.create(code)`, which throws on a
 * code it does not know — inside its socket handler, so the process dies of an uncaught
 * exception and the request's callback never runs. ZooKeeper 3.8 answers a create racing its
 * session's expiry with UNKNOWN_SESSION (-12). Such a reply becomes the nearest known exception
 * instead: UNKNOWN_SESSION a SESSION_EXPIRED (the session is gone), any other one a
 * SYSTEM_ERROR, each naming the server's code in its message.
 */
function tolerateNewerReplyCodes(client: ZookeeperModule): void {
  type Create = (code: number, path?: string) => Error & { code: number };
  const exception = client.Exception as unknown as { create: Create & { tolerant?: true }; SESSION_EXPIRED: number; SYSTEM_ERROR: number };
  if (exception.create.tolerant) return;
  const create = exception.create;
  const tolerant: Create & { tolerant?: true } = (code, path) => {
    try {
      return create(code, path);
    } catch {
      const e = create(code === -12 ? exception.SESSION_EXPIRED : exception.SYSTEM_ERROR, path);
      e.message += ` (the server replied ${NEWER_CODES[code] ?? 'an unknown code'} [${code}])`;
      return e;
    }
  };
  tolerant.tolerant = true;
  exception.create = tolerant;
}
