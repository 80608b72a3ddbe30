import type { Client, Stat } from 'node-zookeeper-client';
import { zookeeper, zookeeperProtocol } from './peer.js';

/**
 * Promise versions of the node-zookeeper-client calls the recipes use, plus error tests.
 * Retries are never done here: the client is created with `retries: 0` and the recipes decide
 * (a create is not idempotent; see protected creation in nodes.ts).
 */

/** True when `e` is the client's exception with `code` (e.g. `zookeeper.Exception.NO_NODE`). */
export function isZkCode(e: unknown, code: number): boolean {
  return typeof e === 'object' && e !== null && typeof (e as { getCode?: unknown }).getCode === 'function' && (e as { getCode(): number }).getCode() === code;
}

/** The connection dropped mid-call: the outcome is unknown, the session may be alive. */
export const isConnectionLoss = (e: unknown): boolean => isZkCode(e, zookeeper.Exception.CONNECTION_LOSS) || isZkCode(e, zookeeper.Exception.OPERATION_TIMEOUT);
export const isNoNode = (e: unknown): boolean => isZkCode(e, zookeeper.Exception.NO_NODE);
export const isNodeExists = (e: unknown): boolean => isZkCode(e, zookeeper.Exception.NODE_EXISTS);
export const isSessionExpired = (e: unknown): boolean => isZkCode(e, zookeeper.Exception.SESSION_EXPIRED);

export type Watcher = (event: unknown) => void;

type Acls = InstanceType<typeof zookeeper.ACL>[];

/** The slice of node-zookeeper-client's protocol module (lib/jute, untyped) that the hot requests need. */
interface Jute {
  OP_CODES: { CREATE: number; DELETE: number; EXISTS: number; GET_CHILDREN2: number };
  protocol: {
    RequestHeader: new () => { type: number };
    CreateRequest: new () => { path: string; data: Buffer; acl: unknown[]; flags: number };
    DeleteRequest: new () => { path: string; version: number };
    ExistsRequest: new () => { path: string; watch: boolean };
    GetChildren2Request: new () => { path: string; watch: boolean };
  };
  Request: new (header: unknown, payload: unknown) => unknown;
}
type Reply<P> = { header: { zxid: Buffer; err: number }; payload: P | null };
interface Manager {
  queue(request: unknown, cb: (e: Error | null, reply: Reply<unknown>) => void): void;
  registerDataWatcher(path: string, watcher: Watcher): void;
  registerExistenceWatcher(path: string, watcher: Watcher): void;
  registerChildWatcher(path: string, watcher: Watcher): void;
}

/**
 * Queues one request on the client's connection, as the client's own call would, minus its retry
 * wrapper: with `retries: 0` that wrapper only calls through, yet it cost each request a loop of
 * closures (async.whilst) and the path's validation again, on the lock cycle's every request.
 * `payload` is one of jute's request records with its fields set; `type` its OP_CODES key.
 */
function send<P>(client: Client, type: keyof Jute['OP_CODES'], payload: unknown, cb: (manager: Manager, e: Error | null, reply: Reply<P>) => void): void {
  const jute = zookeeperProtocol as Jute;
  const header = new jute.protocol.RequestHeader();
  header.type = jute.OP_CODES[type];
  const manager = (client as unknown as { connectionManager: Manager }).connectionManager;
  manager.queue(new jute.Request(header, payload), (e, reply) => cb(manager, e, reply as Reply<P>));
}

/**
 * Creates an ephemeral sequential node with `acls` (open to everyone without); resolves with its
 * path and its czxid. The reply to a write carries, in its header, the zxid the server stamped it
 * with: the server applies writes one at a time and answers each with the last applied zxid, its
 * own, which for a create is the node's czxid. That saves the `exists` a lock would otherwise
 * send for its fence (Curator's create is also one request). node-zookeeper-client has no create2
 * and its `create()` drops the header, so this queues the same CreateRequest itself.
 */
export function zkCreateEphemeralSequential(client: Client, path: string, data: Buffer, acls?: Acls): Promise<{ path: string; czxid: bigint }> {
  const jute = zookeeperProtocol as Jute;
  const openAcl = (zookeeper.ACL as unknown as { OPEN_ACL_UNSAFE: Acls }).OPEN_ACL_UNSAFE;
  const payload = new jute.protocol.CreateRequest();
  payload.path = path;
  payload.acl = (acls ?? openAcl).map((a) => (a as unknown as { toRecord(): unknown }).toRecord());
  payload.flags = zookeeper.CreateMode.EPHEMERAL_SEQUENTIAL;
  payload.data = data;
  return new Promise((resolve, reject) => {
    send<{ path: string }>(client, 'CREATE', payload, (_, e, reply) => (e ? reject(e) : resolve({ path: reply.payload!.path, czxid: reply.header.zxid.readBigInt64BE(0) })));
  });
}

/** Creates `path` and its parents as persistent nodes with `acls`; an existing node is fine. */
export function zkMkdirp(client: Client, path: string, acls?: Acls): Promise<void> {
  return new Promise((resolve, reject) => {
    const cb = (e: unknown): void => (e && !isNodeExists(e) ? reject(e) : resolve());
    if (acls) client.mkdirp(path, Buffer.alloc(0), acls, zookeeper.CreateMode.PERSISTENT, cb);
    else client.mkdirp(path, cb);
  });
}

/** `path`'s children; with a watcher, also watches them (the client's `getChildren`, sent with {@link send}). */
export function zkGetChildren(client: Client, path: string, watcher?: Watcher): Promise<string[]> {
  const payload = new (zookeeperProtocol as Jute).protocol.GetChildren2Request();
  payload.path = path;
  payload.watch = watcher !== undefined;
  return new Promise((resolve, reject) => {
    send<{ children: string[] }>(client, 'GET_CHILDREN2', payload, (manager, e, reply) => {
      if (e) return reject(e);
      if (watcher) manager.registerChildWatcher(path, watcher);
      resolve(reply.payload!.children);
    });
  });
}

/**
 * The node's Stat, or null when it does not exist. With a watcher, watches creation/deletion/change
 * (the client's `exists`, sent with {@link send}: a watch on a node that exists is a data watch).
 */
export function zkExists(client: Client, path: string, watcher?: Watcher): Promise<Stat | null> {
  const payload = new (zookeeperProtocol as Jute).protocol.ExistsRequest();
  payload.path = path;
  payload.watch = watcher !== undefined;
  return new Promise((resolve, reject) => {
    send<{ stat: Stat }>(client, 'EXISTS', payload, (manager, e, reply) => {
      if (e && !isNoNode(e)) return reject(e);
      const exists = e === null;
      if (watcher) {
        if (exists) manager.registerDataWatcher(path, watcher);
        else manager.registerExistenceWatcher(path, watcher);
      }
      resolve(exists ? reply.payload!.stat : null);
    });
  });
}

/** The node's data and Stat, or null when it does not exist. With a watcher, watches deletion and data changes. */
export function zkGetData(client: Client, path: string, watcher?: Watcher): Promise<{ data: Buffer; stat: Stat } | null> {
  return new Promise((resolve, reject) => {
    const cb = (e: Error | null, data: Buffer | undefined, stat: Stat): void => (e ? (isNoNode(e) ? resolve(null) : reject(e)) : resolve({ data: data ?? Buffer.alloc(0), stat }));
    if (watcher) client.getData(path, watcher as never, cb as never);
    else client.getData(path, cb as never);
  });
}

/** Deletes `path` (any version); a missing node is fine (the client's `remove`, sent with {@link send}). */
export function zkRemove(client: Client, path: string): Promise<void> {
  const payload = new (zookeeperProtocol as Jute).protocol.DeleteRequest();
  payload.path = path;
  payload.version = -1;
  return new Promise((resolve, reject) => {
    send(client, 'DELETE', payload, (_, e) => (e && !isNoNode(e) ? reject(e) : resolve()));
  });
}

/**
 * Removes a watcher this process registered on `path`, on the client side (node-zookeeper-client
 * has no `removeWatches` call, so the server-side watch stays until it fires and is then ignored;
 * it is also dropped from the watch set the client re-sends after a reconnect).
 */
export function dropWatcher(client: Client, path: string, watcher: Watcher): void {
  const wm = (client as unknown as { connectionManager?: { watcherManager?: Record<string, Record<string, { removeListener?: (e: string, f: Watcher) => void } | undefined>> } })
    .connectionManager?.watcherManager;
  if (!wm) return;
  for (const kind of WATCHER_TABLES) wm[kind]?.[path]?.removeListener?.('notification', watcher);
}

/** The client's three watcher tables (one array, not one per call: three calls per contended grant). */
const WATCHER_TABLES = ['dataWatchers', 'existenceWatchers', 'childWatchers'] as const;

/**
 * Runs `send` (requests issued back to back) with the client's socket corked, so they leave in one
 * write: node-zookeeper-client writes each request the moment it is queued, and every write is a
 * system call and a trip through the loopback stack that the server's reader is woken for.
 */
export function oneWrite<T>(client: Client, send: () => T): T {
  const socket = (client as unknown as { connectionManager?: { socket?: { writable?: boolean; cork?: () => void; uncork?: () => void } } }).connectionManager?.socket;
  if (!socket?.writable || !socket.cork) return send();
  socket.cork();
  try {
    return send();
  } finally {
    socket.uncork!();
  }
}

/**
 * Forces the client's socket closed so it reconnects (used when the server stops answering).
 * False when there was no open socket to close (none yet, or already being closed).
 */
export function dropSocket(client: Client): boolean {
  const socket = (client as unknown as { connectionManager?: { socket?: { destroyed?: boolean; destroy?: () => void } } }).connectionManager?.socket;
  if (!socket?.destroy || socket.destroyed) return false;
  socket.destroy();
  return true;
}

/**
 * Stops a client for good, after `close()` had its chance to end the session cleanly: no socket
 * left open and no reconnect. node-zookeeper-client keeps trying servers after `close()` when the
 * close raced a reconnect (its deferred server search overwrites the CLOSING state), and waits
 * forever for a silent server to answer the close; either keeps the process alive.
 */
export function killClient(client: Client): void {
  const cm = (client as unknown as { connectionManager?: { connect?: () => void; connectTimeoutHandler?: NodeJS.Timeout; socket?: { destroy?: () => void } } }).connectionManager;
  if (!cm) return;
  cm.connect = () => undefined;
  if (cm.connectTimeoutHandler) clearTimeout(cm.connectTimeoutHandler);
  cm.socket?.destroy?.();
}
