import type { Pool, PoolClient } from 'pg';
import { refused } from '../../core/fence-events.js';
import { ConfigError, StaleFenceError, TenureError } from '../../core/errors.js';
import { optionalNumber, requireFunction, requireOptions, requireString } from '../../core/validate.js';
import { connectWithin, pgEndpoint, queryWithin } from './errors.js';

const MAX_BIGINT = 2n ** 63n - 1n;
import { schemaPending } from './schema.js';
import { requirePool } from './session-lock.js';
import { requireFence, type FencedResource } from '../../core/fencing.js';

/** Options of a {@link PostgresFencedResource}. */
export interface PostgresFencedResourceOptions {
  /**
   * Bound in ms on taking a connection and on each statement of the fence check: past it the
   * write rejects with StoreUnavailableError (nothing commits). Your own statements are yours to
   * bound. @default 5000
   */
  callTimeoutMs?: number;
  /**
   * Server-side bound on a writer stalled inside its write (its process paused, a long GC, your
   * function awaiting something slow between statements): `idle_in_transaction_session_timeout`
   * for the write's transaction. Past it the server ends that session and the write rolls back,
   * so the resource's row lock, which every writer of the resource takes, is free for the next
   * one instead of held until the stalled process wakes. Not applied with `options.client` (that
   * transaction is yours: withXactLock has its own `idleTimeoutMs`). @default callTimeoutMs
   */
  idleTimeoutMs?: number;
}

/** Options of one fenced write. */
export interface PostgresFencedWriteOptions {
  /** Run in this client's open transaction (e.g. `ctx.client` of withXactLock) instead of taking a connection. */
  client?: PoolClient;
}

/** Raises the resource's fence to $2 unless it is already higher (then no row comes back). */
const UPSERT = `INSERT INTO tenure_fence (resource, fence) VALUES ($1, $2)
  ON CONFLICT (resource) DO UPDATE SET fence = EXCLUDED.fence WHERE tenure_fence.fence <= EXCLUDED.fence
  RETURNING fence`;

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
  readonly #callTimeoutMs: number;
  /** The write transaction's first statements: BEGIN and its idle bound, in one message. */
  readonly #begin: string;

  /** @param resource the resource's name (its row in `tenure_fence`). */
  constructor(pool: Pool, resource: string, options?: PostgresFencedResourceOptions) {
    this.#pool = requirePool(pool);
    this.name = requireString('resource', resource, { maxLength: 1000 });
    const o = requireOptions('options', options);
    this.#callTimeoutMs = optionalNumber('callTimeoutMs', o.callTimeoutMs, 5000, { integer: true, min: 1, max: 2 ** 31 - 1 });
    const idle = optionalNumber('idleTimeoutMs', o.idleTimeoutMs, this.#callTimeoutMs, { integer: true, min: 1, max: 2 ** 31 - 1 });
    this.#begin = `BEGIN; SET LOCAL idle_in_transaction_session_timeout = ${idle}`;
  }

  /**
   * Checks `fence` and runs `fn` in one transaction. With `options.client` (e.g. `ctx.client` of
   * {@link withXactLock}) it runs in that client's open transaction instead: no second
   * connection, one commit for lock, fence and data. Why: a holder that needed a second pool
   * connection for its fenced write while every other connection waited for its lock stalled the
   * whole pool (measured: 3 grants in 10 s instead of ~2,000, freed only by lock_timeout). On
   * that path a stale fence throws StaleFenceError and leaves rolling back to the owner of the
   * transaction (withXactLock rolls back when its function throws).
   */
  async write<T>(fence: bigint, fn: (tx: PoolClient) => T | Promise<T>, options?: PostgresFencedWriteOptions): Promise<T> {
    requireFence(fence);
    if (fence > MAX_BIGINT) throw new ConfigError('fence', `must fit a Postgres bigint (at most ${MAX_BIGINT}), got ${fence}`);
    requireFunction('fn', fn);
    const o = requireOptions('options', options);
    if (o.client !== undefined) return this.#writeIn(o.client, fence, fn);
    await schemaPending(this.#pool, this.#callTimeoutMs);
    const client = await connectWithin(this.#pool, this.#callTimeoutMs, `fenced write to ${this.name}`);
    let broken: Error | undefined;
    const onError = (e: Error): void => void (broken = e);
    client.on('error', onError);
    // Past the bound the connection is destroyed on release (its transaction rolls back).
    const bound = <R>(q: Promise<R>): Promise<R> => queryWithin(q, this.#callTimeoutMs, `fenced write to ${this.name}`, pgEndpoint(this.#pool), () => (broken ??= new TenureError('postgres: no answer in time')));
    try {
      await bound(client.query(this.#begin));
      const r = await bound(client.query(UPSERT, [this.name, fence.toString()]));
      if (r.rowCount === 0) {
        const h = await bound(client.query('SELECT fence::text AS fence FROM tenure_fence WHERE resource = $1', [this.name]));
        await bound(client.query('ROLLBACK'));
        throw refused(new StaleFenceError(fence, BigInt((h.rows[0]?.fence as string | undefined) ?? '0'), this.name));
      }
      const value = await fn(client);
      await bound(client.query('COMMIT'));
      return value;
    } catch (e) {
      if (!(e instanceof StaleFenceError) && !broken) await bound(client.query('ROLLBACK')).catch((err: Error) => (broken ??= err));
      throw e;
    } finally {
      client.off('error', onError);
      client.release(broken);
    }
  }

  async #writeIn<T>(client: PoolClient, fence: bigint, fn: (tx: PoolClient) => T | Promise<T>): Promise<T> {
    if (typeof (client as { query?: unknown }).query !== 'function') throw new ConfigError('client', 'must be a pg client in an open transaction');
    const what = `fenced write to ${this.name}`;
    const r = await queryWithin(client.query(UPSERT, [this.name, fence.toString()]), this.#callTimeoutMs, what, pgEndpoint(this.#pool));
    if (r.rowCount === 0) {
      const h = await queryWithin(client.query('SELECT fence::text AS fence FROM tenure_fence WHERE resource = $1', [this.name]), this.#callTimeoutMs, what, pgEndpoint(this.#pool));
      throw refused(new StaleFenceError(fence, BigInt((h.rows[0]?.fence as string | undefined) ?? '0'), this.name));
    }
    return fn(client);
  }

  async highestFence(): Promise<bigint> {
    await schemaPending(this.#pool, this.#callTimeoutMs);
    const r = await queryWithin(this.#pool.query('SELECT fence::text AS fence FROM tenure_fence WHERE resource = $1', [this.name]), this.#callTimeoutMs, `highestFence of ${this.name}`, pgEndpoint(this.#pool));
    return BigInt((r.rows[0]?.fence as string | undefined) ?? '0');
  }
}
