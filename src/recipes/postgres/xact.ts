import type { Pool, PoolClient } from 'pg';
import { AcquireTimeoutError, LeaseLostError, TenureError } from '../../core/errors.js';
import { LeaseController, type Lease } from '../../core/lease.js';
import { BoundedMemo } from '../../core/memo.js';
import { optionalNumber, optionalSignal, requireFunction, requireOptions, type OptionKeys } from '../../core/validate.js';
import type { PgSchemaOptions } from './ident.js';
import { advisoryKey, keyArgs, validateName } from './keys.js';
import { ABANDON_GRACE_MS, abandonWait } from './cancel.js';
import { connectWithin, pgEndpoint, queryWithin, toTenureError } from './errors.js';
import { raceSignal, settledWithin, waitScope } from '../../core/abort.js';
import { schemaPending, tenureTables, type TenureTables } from './schema.js';
import { requirePool } from './session-lock.js';

/** What the function run under {@link withXactLock} gets. */
export interface XactLockContext {
  /** The transaction's client: run the guarded statements on it. */
  readonly client: PoolClient;
  /** The fence of this acquisition (from `tenure_fence_seq`). */
  readonly fence: bigint;
  /** Aborts if the connection dies before the transaction ends. */
  readonly signal: AbortSignal;
  /** The same as a {@link Lease} (its release is a no-op: COMMIT or ROLLBACK ends it). */
  readonly lease: Lease;
}

/** Options of {@link withXactLock} and {@link tryWithXactLock}. */
export interface XactLockOptions extends PgSchemaOptions {
  /** Abort the wait: the waiting connection is closed, which ends the wait at the server. */
  signal?: AbortSignal;
  /** Give up waiting after this long (`lock_timeout`), with AcquireTimeoutError. @default no limit */
  timeoutMs?: number;
  /**
   * Server-side bound on a stalled holder: `idle_in_transaction_session_timeout` for this
   * transaction, so a holder paused between statements loses its connection (and the lock)
   * after this long. @default the server's setting
   */
  idleTimeoutMs?: number;
  /** @default 0x74656e75 ('tenu') */
  namespace?: number;
  /**
   * Bound in ms on every phase but the lock wait: taking a pool connection, a try, COMMIT and
   * ROLLBACK, the cancel of an abandoned wait. With `timeoutMs`, the wait is also bounded on the
   * client at `timeoutMs + callTimeoutMs` (a blackholed server never sends lock_timeout's error).
   * @default 5000
   */
  callTimeoutMs?: number;
}

interface Prepared {
  name: string;
  /** `postgres xact lock 'name'`: the prefix of its errors. */
  what: string;
  tables: TenureTables;
  o: XactLockOptions;
  callTimeoutMs: number;
  /** The first message: BEGIN, the settings, the lock and the fence. */
  sql: string;
}

const TRY_KEYS: OptionKeys<Omit<XactLockOptions, 'timeoutMs'>> = { signal: true, idleTimeoutMs: true, namespace: true, callTimeoutMs: true, schema: true };
const WAIT_XACT_KEYS: OptionKeys<XactLockOptions> = { ...TRY_KEYS, timeoutMs: true };
const NO_OPTIONS: XactLockOptions = Object.freeze({});

/**
 * name → its Prepared without options, per mode: the validation, the key's hash and the SQL are
 * the same every cycle (a BoundedMemo, so generated names cannot grow it).
 */
const bare = { wait: new BoundedMemo<string, Prepared>(), try: new BoundedMemo<string, Prepared>() };

function prepare(pool: unknown, name: unknown, fn: unknown, options: unknown, mode: 'wait' | 'try'): Prepared {
  requirePool(pool);
  requireFunction('fn', fn);
  const memo = options === undefined ? bare[mode] : undefined;
  const known = memo?.get(name as string); // (only validated names are keys)
  if (known) return known;
  const n = validateName('name', name);
  const o = options === undefined ? NO_OPTIONS : requireOptions<XactLockOptions>('options', options as XactLockOptions, (mode === 'wait' ? WAIT_XACT_KEYS : TRY_KEYS) as OptionKeys<XactLockOptions>);
  optionalSignal('signal', o.signal);
  // Both become server settings where 0 means "no limit": out-of-range values must not wrap to it.
  if (o.timeoutMs !== undefined) optionalNumber('timeoutMs', o.timeoutMs, 0, { integer: true, min: 1, max: 2 ** 31 - 1 });
  if (o.idleTimeoutMs !== undefined) optionalNumber('idleTimeoutMs', o.idleTimeoutMs, 0, { integer: true, min: 1, max: 2 ** 31 - 1 });
  const tables = tenureTables(o.schema);
  const callTimeoutMs = optionalNumber('callTimeoutMs', o.callTimeoutMs, 5000, { integer: true, min: 1, max: 2 ** 31 - 1 });
  const key = keyArgs(advisoryKey(n, { namespace: o.namespace, schema: tables.schema }));
  const take =
    mode === 'wait'
      ? `SELECT pg_advisory_xact_lock(${key}), ${tables.nextval}::text AS fence`
      : `SELECT CASE WHEN pg_try_advisory_xact_lock(${key}) THEN ${tables.nextval}::text END AS fence`;
  const settings =
    (o.timeoutMs === undefined ? '' : ` SET LOCAL lock_timeout = ${o.timeoutMs | 0};`) +
    (o.idleTimeoutMs === undefined ? '' : ` SET LOCAL idle_in_transaction_session_timeout = ${o.idleTimeoutMs | 0};`);
  const p: Prepared = { name: n, what: `postgres xact lock '${n}'`, tables, o, callTimeoutMs, sql: `BEGIN;${settings} ${take}` };
  return memo ? memo.set(n, p) : p;
}

/** What `fn` gets: a class, not an object literal with a getter (that costs ~1 µs a cycle to make). */
class Context implements XactLockContext {
  readonly fence: bigint;
  constructor(
    readonly client: PoolClient,
    readonly lease: Lease,
  ) {
    this.fence = lease.fence;
  }
  /** (made on first read: see LeaseController) */
  get signal(): AbortSignal {
    return this.lease.signal;
  }
}

/** An xact lock's lease has nothing to release: COMMIT or ROLLBACK ends it. */
const nothingToRelease = async (): Promise<void> => undefined;

async function run<T>(pool: Pool, p: Prepared, mode: 'wait' | 'try', fn: (ctx: XactLockContext) => Promise<T> | T): Promise<{ acquired: true; value: T } | { acquired: false }> {
  const { o, callTimeoutMs, what } = p;
  const endpoint = pgEndpoint(pool);
  o.signal?.throwIfAborted();
  // timeoutMs bounds the whole wait, the pool check-out included (a pool whose every client is
  // out must not hold the caller for callTimeoutMs); `signal` is the caller's signal and it.
  // Without either, nothing can end the wait: no scope, and no listener or race on one (an
  // AbortSignal and its listeners are a measurable part of an uncontended cycle's client work).
  const scope = o.signal || o.timeoutMs !== undefined ? waitScope(what, { signal: o.signal, timeoutMs: o.timeoutMs }) : undefined;
  const signal = scope?.signal;
  let client: PoolClient;
  try {
    const schema = schemaPending(pool, p.tables, callTimeoutMs);
    if (schema) await raceSignal(schema, signal);
    client = await connectWithin(pool, callTimeoutMs, `${what}: connect`, signal);
  } catch (e) {
    scope?.dispose();
    throw e;
  }
  let destroy: Error | undefined;
  let returned = false;
  const giveBack = (err?: Error): void => {
    if (returned) return;
    returned = true;
    client.release(err);
  };
  let controller: LeaseController | undefined;
  const onError = (e: Error): void => {
    destroy = e;
    controller?.lose('connection-lost', e);
  };
  const onEnd = (): void => controller?.lose('connection-lost');
  let abandoned: Promise<void> | undefined;
  let waiting: Promise<unknown> | undefined;
  const onAbort = signal
    ? (): void => {
        if (controller) return; // holding: the caller's signal does not end a transaction
        destroy = new TenureError('postgres xact lock: acquire aborted');
        abandoned = abandonWait(client, giveBack, callTimeoutMs, waiting);
      }
    : undefined;
  client.on('error', onError);
  client.on('end', onEnd);
  if (onAbort) signal?.addEventListener('abort', onAbort, { once: true });
  let open = false;
  try {
    open = true;
    // Destroying the connection ends the server's side too (the transaction rolls back).
    const cut = (): void => {
      destroy ??= new TenureError(`${what}: no answer from the server in time`);
      client.on('error', () => undefined);
      giveBack(destroy);
    };
    let results;
    try {
      const q = client.query(p.sql);
      waiting = q;
      // A try answers at once; a wait with timeoutMs is also bounded here, for a server that cannot say lock_timeout.
      const bound = mode === 'try' ? callTimeoutMs : o.timeoutMs === undefined ? undefined : o.timeoutMs + callTimeoutMs;
      // Raced with the signal: on a silent link the abandoned query never answers.
      results = await raceSignal(bound === undefined ? q : queryWithin(q, bound, what, endpoint, cut), signal);
    } catch (e) {
      if (signal?.aborted) {
        if (abandoned) await settledWithin(abandoned, ABANDON_GRACE_MS);
        throw signal.reason;
      }
      const sqlstate = (e as { code?: unknown; cause?: { code?: unknown } }).cause?.code ?? (e as { code?: unknown }).code;
      if (sqlstate === '55P03' && o.timeoutMs !== undefined) {
        throw new AcquireTimeoutError(o.timeoutMs, what);
      }
      throw toTenureError(e, what, endpoint);
    }
    if (signal?.aborted) {
      // Granted just before the cancel arrived: the abandoning destroy rolls it back.
      if (abandoned) await settledWithin(abandoned, ABANDON_GRACE_MS);
      throw signal.reason;
    }
    const last = Array.isArray(results) ? results[results.length - 1] : results;
    const fence = last?.rows[0]?.fence as string | null | undefined;
    if (fence === null || fence === undefined) {
      await queryWithin(client.query('ROLLBACK'), callTimeoutMs, `${what}: rollback`, endpoint, cut);
      open = false;
      return { acquired: false };
    }
    if (onAbort) signal?.removeEventListener('abort', onAbort);
    scope?.dispose();
    controller = new LeaseController({ name: p.name, fence: BigInt(fence), release: nothingToRelease });
    const value = await fn(new Context(client, controller.lease));
    if (controller.ended) throw controller.endError; // the connection died: nothing committed
    await queryWithin(client.query('COMMIT'), callTimeoutMs, `${what}: commit`, endpoint, cut);
    open = false;
    return { acquired: true, value };
  } catch (e) {
    if (open && !destroy) await queryWithin(client.query('ROLLBACK'), callTimeoutMs, `${what}: rollback`, endpoint).catch((err: Error) => (destroy = err));
    throw e instanceof LeaseLostError || !controller?.ended ? e : controller.endError;
  } finally {
    if (onAbort) signal?.removeEventListener('abort', onAbort);
    scope?.dispose();
    controller?.lose('released', undefined, `${p.name}: transaction ended`);
    client.off('end', onEnd);
    client.off('error', onError);
    if (destroy) client.on('error', () => undefined);
    giveBack(destroy);
  }
}

/**
 * Runs `fn` inside a transaction holding `pg_advisory_xact_lock` on `name`: the default Postgres
 * lock. It is released by COMMIT (when `fn` resolves) or ROLLBACK (when it throws), so nothing can
 * leak, and it works behind a transaction-pooling proxy. Waits for the lock.
 */
export async function withXactLock<T>(pool: Pool, name: string, fn: (ctx: XactLockContext) => Promise<T> | T, options?: XactLockOptions): Promise<T> {
  const p = prepare(pool, name, fn, options, 'wait');
  const r = await run(pool, p, 'wait', fn);
  if (!r.acquired) throw new TenureError(`postgres xact lock '${p.name}': a waiting lock returned without the lock`);
  return r.value;
}

/** Like {@link withXactLock}, but does not wait: `{ acquired: false }` when the lock is held. */
export async function tryWithXactLock<T>(
  pool: Pool,
  name: string,
  fn: (ctx: XactLockContext) => Promise<T> | T,
  options?: Omit<XactLockOptions, 'timeoutMs'>,
): Promise<
  | {
      /** The lock was taken and `fn` ran (and committed). */
      acquired: true;
      /** What `fn` returned. */
      value: T;
    }
  | {
      /** Another transaction holds the lock; `fn` did not run. */
      acquired: false;
    }
> {
  const p = prepare(pool, name, fn, options, 'try'); // a try does not wait: timeoutMs is refused, not ignored
  return run(pool, p, 'try', fn);
}
