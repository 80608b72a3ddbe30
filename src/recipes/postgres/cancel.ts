import { connect } from 'node:net';
import type { PoolClient } from 'pg';
import { TenureError } from '../../core/errors.js';
import { settledWithin } from '../../core/abort.js';

/**
 * How long a wait given up on (aborted, timed out) waits for its abandonment before it rejects:
 * on loopback the cancel lands in a millisecond; on a silent link it goes on in the background
 * (bounded by callTimeoutMs) and the caller is not held past its own bound.
 */
export const ABANDON_GRACE_MS = 100;

/** Postgres' CancelRequest code (protocol 3: 1234 << 16 | 5678). */
const CANCEL_REQUEST = 80877102;

interface Keyed {
  processID?: number | null;
  secretKey?: number | null;
  host?: string;
  port?: number;
}

/**
 * Sends the protocol's CancelRequest for `client`'s running query on a fresh socket, and resolves
 * when the server has read it (it closes the socket) or after `ms` (a blackholed server never
 * answers). Never rejects.
 *
 * Why the protocol and not `pg_cancel_backend(pid)`: behind PgBouncer `client.processID` is
 * PgBouncer's own key, not a backend's pid, so `pg_cancel_backend` hit nothing and the abandoned
 * wait stayed queued at the server; PgBouncer forwards a CancelRequest to the backend that runs
 * the client's query. It also needs no privilege (`pg_cancel_backend` needs the same role or
 * `pg_signal_backend`).
 */
export function cancelQuery(client: PoolClient, ms: number): Promise<void> {
  const k = client as unknown as Keyed;
  const { host, port } = k;
  if (typeof k.processID !== 'number' || typeof k.secretKey !== 'number' || host === undefined || port === undefined) return Promise.resolve();
  const packet = Buffer.alloc(16);
  packet.writeInt32BE(16, 0);
  packet.writeInt32BE(CANCEL_REQUEST, 4);
  packet.writeInt32BE(k.processID, 8);
  packet.writeInt32BE(k.secretKey, 12);
  return new Promise<void>((resolve) => {
    const sock = host.startsWith('/') ? connect(`${host}/.s.PGSQL.${port}`) : connect({ host, port });
    const done = (): void => {
      clearTimeout(timer);
      sock.destroy();
      resolve();
    };
    const timer = setTimeout(done, ms);
    // Write, then wait for the server to close: PgBouncer 1.18 exits ("bad client state") when a
    // cancel connection is half-closed by the client before it has forwarded the request.
    sock.once('connect', () => sock.write(packet));
    sock.once('close', done);
    sock.on('error', done); // (every error: a second one unheard would crash the process)
  });
}

/**
 * Ends a connection that is waiting for a lock. Closing the socket alone is not enough: a backend
 * blocked in a lock wait does not notice its client left until it is granted the lock (unless
 * `client_connection_check_interval` is set), so it would sit in the queue and briefly take the
 * lock. So: cancel the running query on the real backend, wait (bounded) until the waiting query
 * has ended, then destroy the client, which frees its pool slot and ends whatever the cancel did
 * not. The wait matters behind PgBouncer: it forwards a cancel asynchronously, for a client still
 * linked to its server, and dropped it when the client went first. Each step waits at most `ms`
 * (a blackholed server answers neither; the backend then goes when the server notices the dead
 * socket). Best effort; never throws.
 */
export async function abandonWait(client: PoolClient, release: (err: Error) => void, ms: number, waiting?: Promise<unknown>): Promise<void> {
  client.on('error', () => undefined);
  await cancelQuery(client, ms);
  if (waiting) await settledWithin(waiting, ms);
  release(new TenureError('postgres lock wait abandoned'));
}
