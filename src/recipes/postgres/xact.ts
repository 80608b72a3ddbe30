import type { Pool, PoolClient } from 'pg';
import { AcquireTimeoutError, LeaseLostError, TenureError } from '../../core/errors.js';
import { LeaseController, type Lease } from '../../core/lease.js';
import { optionalNumber, optionalSignal, requireFunction, requireOptions } from '../../core/validate.js';
import { advisoryKey, keyArgs, validateName, validateNamespace, DEFAULT_NAMESPACE } from './keys.js';
import { abandonWait } from './cancel.js';
import { ensureSchema } from './schema.js';
import { requirePool } from './session-lock.js';

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

export interface XactLockOptions {
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
}

interface Prepared {
  key: string;
  name: string;
  o: XactLockOptions;
}

function prepare(pool: unknown, name: unknown, fn: unknown, options: unknown): Prepared {
  requirePool(pool);
  const n = validateName('name', name);
  requireFunction('fn', fn);
  const o = requireOptions<XactLockOptions>('options', options as XactLockOptions | undefined);
  optionalSignal('signal', o.signal);
  // Both become server settings where 0 means "no limit": out-of-range values must not wrap to it.
  if (o.timeoutMs !== undefined) optionalNumber('timeoutMs', o.timeoutMs, 0, { integer: true, min: 1, max: 2 ** 31 - 1 });
  if (o.idleTimeoutMs !== undefined) optionalNumber('idleTimeoutMs', o.idleTimeoutMs, 0, { integer: true, min: 1, max: 2 ** 31 - 1 });
  const ns = o.namespace === undefined ? DEFAULT_NAMESPACE : validateNamespace('namespace', o.namespace);
  return { key: keyArgs(advisoryKey(n, ns)), name: n, o };
}

async function run<T>(pool: Pool, p: Prepared, mode: 'wait' | 'try', fn: (ctx: XactLockContext) => Promise<T> | T): Promise<{ acquired: true; value: T } | { acquired: false }> {
  const { o } = p;
  o.signal?.throwIfAborted();
  await ensureSchema(pool);
  const client = await pool.connect();
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
  const onAbort = (): void => {
    if (controller) return; // holding: the caller's signal does not end a transaction
    destroy = new TenureError('postgres xact lock: acquire aborted');
    abandoned = abandonWait(pool, client, giveBack);
  };
  client.on('error', onError);
  client.on('end', onEnd);
  o.signal?.addEventListener('abort', onAbort, { once: true });
  let open = false;
  try {
    const settings = [
      o.timeoutMs === undefined ? '' : `SET LOCAL lock_timeout = ${o.timeoutMs | 0};`,
      o.idleTimeoutMs === undefined ? '' : `SET LOCAL idle_in_transaction_session_timeout = ${o.idleTimeoutMs | 0};`,
    ].join(' ');
    const take =
      mode === 'wait'
        ? `SELECT pg_advisory_xact_lock(${p.key}), nextval('tenure_fence_seq')::text AS fence`
        : `SELECT CASE WHEN pg_try_advisory_xact_lock(${p.key}) THEN nextval('tenure_fence_seq')::text END AS fence`;
    open = true;
    let results;
    try {
      results = await client.query(`BEGIN; ${settings} ${take}`);
    } catch (e) {
      if (o.signal?.aborted) {
        await abandoned;
        throw o.signal.reason;
      }
      if ((e as { code?: string }).code === '55P03' && o.timeoutMs !== undefined) {
        throw new AcquireTimeoutError(o.timeoutMs, `postgres xact lock '${p.name}'`);
      }
      throw e;
    }
    const last = Array.isArray(results) ? results[results.length - 1] : results;
    const fence = last?.rows[0]?.fence as string | null | undefined;
    if (fence === null || fence === undefined) {
      await client.query('ROLLBACK');
      open = false;
      return { acquired: false };
    }
    o.signal?.removeEventListener('abort', onAbort);
    controller = new LeaseController({ name: p.name, fence: BigInt(fence), release: async () => undefined });
    const lease = controller.lease;
    const value = await fn({ client, fence: lease.fence, signal: lease.signal, lease });
    if (lease.signal.aborted) throw lease.signal.reason; // the connection died: nothing committed
    await client.query('COMMIT');
    open = false;
    return { acquired: true, value };
  } catch (e) {
    if (open && !destroy) await client.query('ROLLBACK').catch((err: Error) => (destroy = err));
    throw e instanceof LeaseLostError || !controller?.lease.signal.aborted ? e : controller.lease.signal.reason;
  } finally {
    o.signal?.removeEventListener('abort', onAbort);
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
  const p = prepare(pool, name, fn, options);
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
): Promise<{ acquired: true; value: T } | { acquired: false }> {
  const p = prepare(pool, name, fn, options);
  return run(pool, p, 'try', fn);
}
