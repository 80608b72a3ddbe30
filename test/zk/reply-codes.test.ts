import { afterAll, beforeAll, expect, it } from 'vitest';
import { FaultProxy, ZooKeeperServer } from '../../src/testing/index.js';
import { isSessionExpired } from '../../src/recipes/zk/ops.js';
import type { ZkSession } from '../../src/recipes/zk/index.js';
import { openSession } from './helpers.js';

/**
 * ZooKeeper 3.5+ has reply codes node-zookeeper-client 1.1 does not know; ZooKeeper 3.8 answers a
 * create that races its session's expiry with UNKNOWN_SESSION (-12), and the client's socket
 * handler threw on it ("Unknown code: -12", an uncaught exception: the process died). The race is
 * not reproducible on demand, so the reply is written into the client's socket handler for a
 * request really in flight to a real server (held on a blackholed link so the server's own reply
 * cannot come first).
 */

let zk: ZooKeeperServer;
let proxy: FaultProxy;
let session: ZkSession;

beforeAll(async () => {
  zk = await new ZooKeeperServer().start();
  proxy = await new FaultProxy({ target: { port: zk.port } }).start();
  session = await openSession(`127.0.0.1:${proxy.port}`, { ttlMs: 9000 });
});
afterAll(async () => {
  proxy?.heal();
  await session?.close();
  await proxy?.stop();
  await zk?.stop();
});

interface Manager {
  pendingQueue: { request: { header: { xid: number } } }[];
  onSocketData(buffer: Buffer): void;
}

/** A reply frame: length, then the ReplyHeader (xid int32, zxid int64, err int32). */
function reply(xid: number, err: number): Buffer {
  const b = Buffer.alloc(20);
  b.writeInt32BE(16, 0);
  b.writeInt32BE(xid, 4);
  b.writeBigInt64BE(0n, 8);
  b.writeInt32BE(err, 16);
  return b;
}

it.each([
  [-12, 'UNKNOWN_SESSION', true],
  [-127, 'THROTTLED_OP', false],
  [-999, 'an unknown code', false],
])('a reply with code %i (%s) fails its request with a ZooKeeper exception instead of throwing in the socket handler', async (code, name, expired) => {
  const manager = (session.client as unknown as { connectionManager: Manager }).connectionManager;
  proxy.blackhole();
  try {
    const answered = new Promise<unknown>((resolve) => session.client.exists('/reply-codes', (e: unknown) => resolve(e)));
    const pending = manager.pendingQueue.at(-1);
    expect(pending).toBeDefined();
    expect(() => manager.onSocketData(reply(pending!.request.header.xid, code))).not.toThrow();
    const e = (await answered) as Error;
    expect(e.message).toContain(`${name} [${code}]`);
    expect(isSessionExpired(e)).toBe(expired);
  } finally {
    proxy.heal();
  }
});
