import type { Pool, PoolClient } from 'pg';
import { StaleFenceError } from '../../core/errors.js';
import { requireString } from '../../core/validate.js';
import { ensureSchema } from './schema.js';
import { requirePool } from './session-lock.js';
import { requireFence, type FencedResource } from '../../core/fencing.js';

/**
 * A {@link FencedResource} in Postgres: `write(fence, async (tx) => …)` runs your statements in
 * the same transaction as the guarded upsert of the resource's row in `tenure_fence`
 * (`… SET fence = $f WHERE fence <= $f`). A lower fence rejects with StaleFenceError and your
 * function never runs; if it throws, the transaction rolls back and the fence does not move.
 * The row lock serializes writers of one resource.
 *
 * ```ts
 * const accounts = new PostgresFencedResource(pool, 'accounts');
 * await accounts.write(lease.fence, (tx) => tx.query('UPDATE accounts SET …'));
 * ```
 */
export class PostgresFencedResource implements FencedResource<PoolClient> {
  readonly name: string;
  readonly #pool: Pool;

  constructor(pool: Pool, resource: string) {
    this.#pool = requirePool(pool);
    this.name = requireString('resource', resource, { maxLength: 1000 });
  }

  async write<T>(fence: bigint, fn: (tx: PoolClient) => T | Promise<T>): Promise<T> {
    requireFence(fence);
    await ensureSchema(this.#pool);
    const client = await this.#pool.connect();
    let broken: Error | undefined;
    const onError = (e: Error): void => void (broken = e);
    client.on('error', onError);
    try {
      await client.query('BEGIN');
      const r = await client.query(
        `INSERT INTO tenure_fence (resource, fence) VALUES ($1, $2)
         ON CONFLICT (resource) DO UPDATE SET fence = EXCLUDED.fence WHERE tenure_fence.fence <= EXCLUDED.fence
         RETURNING fence`,
        [this.name, fence.toString()],
      );
      if (r.rowCount === 0) {
        const h = await client.query('SELECT fence::text AS fence FROM tenure_fence WHERE resource = $1', [this.name]);
        await client.query('ROLLBACK');
        throw new StaleFenceError(fence, BigInt((h.rows[0]?.fence as string | undefined) ?? '0'), this.name);
      }
      const value = await fn(client);
      await client.query('COMMIT');
      return value;
    } catch (e) {
      if (!(e instanceof StaleFenceError)) await client.query('ROLLBACK').catch((err: Error) => (broken ??= err));
      throw e;
    } finally {
      client.off('error', onError);
      client.release(broken);
    }
  }

  async highestFence(): Promise<bigint> {
    await ensureSchema(this.#pool);
    const r = await this.#pool.query('SELECT fence::text AS fence FROM tenure_fence WHERE resource = $1', [this.name]);
    return BigInt((r.rows[0]?.fence as string | undefined) ?? '0');
  }
}
