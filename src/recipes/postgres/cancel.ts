import type { Pool, PoolClient } from 'pg';
import { TenureError } from '../../core/errors.js';

/**
 * Ends a connection that is waiting for a lock. Closing the socket alone is not enough: a backend
 * blocked in a lock wait does not notice its client left until it is granted the lock (unless
 * `client_connection_check_interval` is set), so it would sit in the queue and briefly take the
 * lock. So: destroy the client (which frees its pool slot), then cancel the backend by pid from
 * the pool, and wait for that — at most `ms` (a blackholed server never answers the cancel;
 * the backend then goes when the server notices the dead socket). Best effort; never throws.
 */
export async function abandonWait(pool: Pool, client: PoolClient, release: (err: Error) => void, ms: number): Promise<void> {
  const pid = (client as PoolClient & { processID?: number | null }).processID;
  client.on('error', () => undefined);
  release(new TenureError('postgres lock wait abandoned'));
  if (typeof pid !== 'number') return;
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([
    pool.query('SELECT pg_cancel_backend($1)', [pid]).catch(() => undefined),
    new Promise<void>((r) => (timer = setTimeout(r, ms))),
  ]);
  clearTimeout(timer);
}
