import type { Pool, PoolClient } from 'pg';
import { refused } from '../../core/fence-events.js';
import { ConfigError, StaleFenceError, TenureError } from '../../core/errors.js';
import { raceSignal, settledWithin, waitScope } from '../../core/abort.js';
import { WAIT_KEYS, type WaitOptions } from '../../core/options.js';
import { optionalNumber, requireFunction, requireOptions, requireString } from '../../core/validate.js';
import { ABANDON_GRACE_MS, abandonWait } from './cancel.js';
import { connectWithin, pgEndpoint, queryWithin } from './errors.js';

const MAX_BIGINT = 2n ** 63n - 1n;
import type { PgSchemaOptions } from './ident.js';
import { schemaPending, tenureTables, type TenureTables } from './schema.js';
import { requirePool } from './session-lock.js';
import { requireFence, type FencedResource } from '../../core/fencing.js';

/** Options of a {@link PostgresFencedResource}. */
export interface PostgresFencedResourceOptions extends PgSchemaOptions {
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

/**
 * Options of one fenced write. `signal` and `timeoutMs` bound the whole write up to its COMMIT —
 * schema check, pool check-out, the fence check (which waits for another writer's row lock) and
 * your function: given up on, the write's connection is cancelled and closed, the transaction
 * rolls back and nothing commits; it rejects with exactly `signal.reason`, or AcquireTimeoutError.
 * Once COMMIT is sent they no longer apply (its outcome would be unknown); `callTimeoutMs` bounds
 * it. With `client` (your transaction) they bound the fence check's statements, and ending your
 * transaction is yours.
 */
export interface PostgresFencedWriteOptions extends WaitOptions {
  /** Run in this client's open transaction (e.g. `ctx.client` of withXactLock) instead of taking a connection. */
  client?: PoolClient;
}

/** Raises the resource's fence to $2 unless it is already higher (then no row comes back). */
const upsertSql = (t: TenureTables): string => `INSERT INTO ${t.fence} AS r (resource, fence) VALUES ($1, $2)
  ON CONFLICT (resource) DO UPDATE SET fence = EXCLUDED.fence WHERE r.fence <= EXCLUDED.fence
  RETURNING fence`;

/**
 * A {@link FencedResource} in Postgres: `write(fence, async (tx) => …)` runs your statements in
 * the same transaction as the guarded upsert of the resource's row in `tenure_fence` (of `schema`)
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
  readonly #tables: TenureTables;
  /** The guarded upsert and the read of the fence, in this resource's schema. */
  readonly #upsert: string;
  readonly #read: string;
  /** The write transaction's first statements: BEGIN and its idle bound, in one message. */
  readonly #begin: string;

  /** @param resource the resource's name (its row in `tenure_fence`). */
  constructor(pool: Pool, resource: string, options?: PostgresFencedResourceOptions) {
    this.#pool = requirePool(pool);
    this.name = requireString('resource', resource, { maxLength: 1000 });
    const o = requireOptions('options', options, { callTimeoutMs: true, idleTimeoutMs: true, schema: true });
    this.#callTimeoutMs = optionalNumber('callTimeoutMs', o.callTimeoutMs, 5000, { integer: true, min: 1, max: 2 ** 31 - 1 });
    const idle = optionalNumber('idleTimeoutMs', o.idleTimeoutMs, this.#callTimeoutMs, { integer: true, min: 1, max: 2 ** 31 - 1 });
    this.#begin = `BEGIN; SET LOCAL idle_in_transaction_session_timeout = ${idle}`;
    this.#tables = tenureTables(o.schema);
    this.#upsert = upsertSql(this.#tables);
    this.#read = `SELECT fence::text AS fence FROM ${this.#tables.fence} WHERE resource = $1`;
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
    const o = requireOptions('options', options, { client: true, ...WAIT_KEYS });
    const what = `fenced write to ${this.name}`;
    const scope = waitScope(what, o);
    try {
      scope.signal.throwIfAborted();
      return await (o.client !== undefined ? this.#writeIn(o.client, fence, fn, scope.signal) : this.#writeOwn(fence, fn, scope.signal));
    } finally {
      scope.dispose();
    }
  }

  async #writeOwn<T>(fence: bigint, fn: (tx: PoolClient) => T | Promise<T>, signal: AbortSignal): Promise<T> {
    const what = `fenced write to ${this.name}`;
    const schema = schemaPending(this.#pool, this.#tables, this.#callTimeoutMs);
    if (schema) await raceSignal(schema, signal);
    const client = await connectWithin(this.#pool, this.#callTimeoutMs, what, signal);
    let broken: Error | undefined;
    const onError = (e: Error): void => void (broken = e);
    client.on('error', onError);
    let returned = false;
    const giveBack = (err?: Error): void => {
      if (returned) return;
      returned = true;
      client.release(err);
    };
    // Given up on before COMMIT: cancel what runs (a wait for the row lock ends at once), close
    // the connection (the transaction rolls back). On a silent link neither answers; the caller
    // is not held for it.
    let inFlight: Promise<unknown> | undefined;
    let abandoned: Promise<void> | undefined;
    const onAbort = (): void => {
      broken ??= new TenureError(`postgres: ${what}: given up on`);
      client.on('error', () => undefined);
      abandoned = abandonWait(client, giveBack, this.#callTimeoutMs, inFlight);
    };
    signal.addEventListener('abort', onAbort, { once: true });
    // Past the bound the connection is destroyed on release (its transaction rolls back).
    const bound = <R>(q: Promise<R>): Promise<R> => {
      inFlight = q;
      return raceSignal(queryWithin(q, this.#callTimeoutMs, what, pgEndpoint(this.#pool), () => (broken ??= new TenureError('postgres: no answer in time'))), signal);
    };
    try {
      await bound(client.query(this.#begin));
      const r = await bound(client.query(this.#upsert, [this.name, fence.toString()]));
      if (r.rowCount === 0) {
        const h = await bound(client.query(this.#read, [this.name]));
        await bound(client.query('ROLLBACK'));
        throw refused(new StaleFenceError(fence, BigInt((h.rows[0]?.fence as string | undefined) ?? '0'), this.name));
      }
      const value = await fn(client);
      signal.throwIfAborted(); // given up on while fn ran: the abandon rolls it back
      signal.removeEventListener('abort', onAbort);
      await queryWithin(client.query('COMMIT'), this.#callTimeoutMs, what, pgEndpoint(this.#pool), () => (broken ??= new TenureError('postgres: no answer in time')));
      return value;
    } catch (e) {
      if (abandoned) {
        await settledWithin(abandoned, ABANDON_GRACE_MS);
        throw signal.reason;
      }
      if (!(e instanceof StaleFenceError) && !broken) await bound(client.query('ROLLBACK')).catch((err: Error) => (broken ??= err));
      throw e;
    } finally {
      signal.removeEventListener('abort', onAbort);
      client.off('error', onError);
      giveBack(broken);
    }
  }

  async #writeIn<T>(client: PoolClient, fence: bigint, fn: (tx: PoolClient) => T | Promise<T>, signal: AbortSignal): Promise<T> {
    if (typeof (client as { query?: unknown }).query !== 'function') throw new ConfigError('client', 'must be a pg client in an open transaction');
    const what = `fenced write to ${this.name}`;
    const r = await raceSignal(queryWithin(client.query(this.#upsert, [this.name, fence.toString()]), this.#callTimeoutMs, what, pgEndpoint(this.#pool)), signal);
    if (r.rowCount === 0) {
      const h = await raceSignal(queryWithin(client.query(this.#read, [this.name]), this.#callTimeoutMs, what, pgEndpoint(this.#pool)), signal);
      throw refused(new StaleFenceError(fence, BigInt((h.rows[0]?.fence as string | undefined) ?? '0'), this.name));
    }
    return fn(client);
  }

  /** The highest fence accepted so far; `options` bounds the read (within `callTimeoutMs` either way). */
  async highestFence(options?: WaitOptions): Promise<bigint> {
    const what = `highestFence of ${this.name}`;
    const scope = waitScope(what, requireOptions('options', options, WAIT_KEYS));
    try {
      scope.signal.throwIfAborted();
      const schema = schemaPending(this.#pool, this.#tables, this.#callTimeoutMs);
      if (schema) await raceSignal(schema, scope.signal);
      const r = await raceSignal(queryWithin(this.#pool.query(this.#read, [this.name]), this.#callTimeoutMs, what, pgEndpoint(this.#pool)), scope.signal);
      return BigInt((r.rows[0]?.fence as string | undefined) ?? '0');
    } finally {
      scope.dispose();
    }
  }
}
