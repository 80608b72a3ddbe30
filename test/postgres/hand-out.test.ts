import { createServer, connect, type Server, type Socket } from 'node:net';
import type pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { StoreUnavailableError } from '../../src/core/errors.js';
import { PgSessionLock } from '../../src/recipes/postgres/index.js';
import { PostgresServer } from '../../src/testing/index.js';
import { makePool } from './helpers.js';

/**
 * A connection that the server ends right after it is ready (a restart's FATAL 57P01 read in the
 * same TCP chunk as the startup's ReadyForQuery): pg-pool hands the client out and drops its own
 * 'error' listener in that same synchronous step, so pg emitted the FATAL on a client nobody
 * listened to, and the process died (the ten-minute Postgres chaos runs lost workers this way).
 *
 * The relay below forwards a real server's bytes, but holds the reply from the first
 * ReadyForQuery on and delivers it with what follows (the FATAL of the backend the test
 * terminates) in one write, so the client reads both at once.
 */
let server: PostgresServer;
let admin: pg.Pool;

beforeAll(async () => {
  server = await new PostgresServer().start();
  admin = makePool({ ...server.connectionConfig, max: 1 });
});

afterAll(async () => {
  await admin?.end();
  await server?.stop();
});

/** Calls `ready(backendPid)` when a connection's startup reply reaches ReadyForQuery; from then on holds the reply and sends it, with everything after it, in one write when the server closes. */
async function coalescingRelay(ready: (pid: number) => void): Promise<{ port: number; close(): Promise<void> }> {
  const sockets = new Set<Socket>();
  const relay: Server = createServer((client) => {
    sockets.add(client);
    const up = connect({ host: '127.0.0.1', port: server.port });
    sockets.add(up);
    client.on('data', (d) => up.write(d));
    client.on('error', () => up.destroy());
    let buf = Buffer.alloc(0);
    let holding = false;
    let held: Buffer[] = [];
    up.on('data', (d: Buffer) => {
      if (holding) return void held.push(d);
      buf = Buffer.concat([buf, d]);
      // Walk whole messages (type byte, int32 length): find the backend key and ReadyForQuery.
      let pid = 0;
      for (let at = 0; at + 5 <= buf.length; ) {
        const len = buf.readInt32BE(at + 1);
        if (at + 1 + len > buf.length) break;
        const type = String.fromCharCode(buf[at]!);
        if (type === 'K') pid = buf.readInt32BE(at + 5);
        if (type === 'Z') {
          holding = true;
          held = [buf];
          ready(pid);
          return;
        }
        at += 1 + len;
      }
    });
    up.on('end', () => {
      client.end(Buffer.concat(held.length > 0 ? held : [buf]));
    });
    up.on('error', () => client.destroy());
  });
  await new Promise<void>((r) => relay.listen(0, '127.0.0.1', r));
  return {
    port: (relay.address() as { port: number }).port,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((r) => relay.close(() => r()));
    },
  };
}

it('a connection ended by the server in the same read as its ReadyForQuery is refused with a StoreUnavailableError, and the process lives on', async () => {
  const relay = await coalescingRelay((pid) => void admin.query('SELECT pg_terminate_backend($1)', [pid]));
  const pool = makePool({ ...server.connectionConfig, port: relay.port, max: 2 });
  try {
    const lock = new PgSessionLock(pool, 'hand-out', { ttlMs: 3000 });
    const err = await lock.acquire({ timeoutMs: 10_000 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(StoreUnavailableError);
    expect(String((err as Error).message)).toMatch(/terminating connection|terminated/);
  } finally {
    await pool.end().catch(() => undefined);
    await relay.close();
  }
  // The same lock name on a healthy pool: nothing was left held.
  const lock = new PgSessionLock(admin, 'hand-out');
  const lease = await lock.acquire({ timeoutMs: 5000 });
  await lease.release();
});
