import { LeaseEmitter } from '../../core/lease-events.js';
import type { Pool, QueryResult } from 'pg';
import { raceSignal, settledWithin, sleep, waitScope } from '../../core/abort.js';
import type { LeaderInfo } from '../../core/candidate.js';
import type { Clock } from '../../core/clock.js';
import { BusyError, ClosedError, ConfigError } from '../../core/errors.js';
import { LeaseController, type Lease } from '../../core/lease.js';
import { optionalClock, optionalLogger, WAIT_KEYS, type Logger, type WaitOptions } from '../../core/options.js';
import { optionalId, optionalSignal, requireOptions, type OptionKeys } from '../../core/validate.js';
import { forgetSql, guardSql, holderOf, holderSql, mustRecord, recordBefore, recordSql, releaseSql, takeSql, tidySql } from './holder.js';
import type { PgSchemaOptions } from './ident.js';
import { advisoryKey, validateName, type AdvisoryKey } from './keys.js';
import { schemaPending, tenureTables, type TenureTables } from './schema.js';
import { pgEndpoint, queryWithin, toTenureError } from './errors.js';
import { heartbeatMs, PgSession, pgTiming, type PgTiming } from './session.js';
import { ABANDON_GRACE_MS } from './cancel.js';

/** Options of a {@link PgSessionLock}. */
export interface PgLockOptions extends PgSchemaOptions {
  /** This participant's id, recorded while it holds; what `holder()` shows. @default a random UUID */
  id?: string;
  /**
   * Makes the pinned connection a lease the server enforces (the lock's transaction sets
   * `idle_in_transaction_session_timeout` = `ttlMs`; a heartbeat every `ttlMs / 3`, a local
   * deadline `ttlMs − safetyMarginMs` after the last acknowledged heartbeat's send).
   * @default undefined: no heartbeat; the lease lasts as long as the connection
   */
  ttlMs?: number;
  /** Must be > 0 and < 2/3 of ttlMs; only with `ttlMs`. @default ttlMs / 5 */
  safetyMarginMs?: number;
  /**
   * Bound in ms on every phase but the lock wait itself: taking a pool connection, a try, the
   * unlock, `holder()`, a heartbeat. A server that is down or blackholed answers with
   * StoreUnavailableError within it. The lock wait is bounded by `timeoutMs` / `signal`.
   * @default 5000
   */
  callTimeoutMs?: number;
  /** The int4 namespace of the advisory keyspace (see keys.ts). @default 0x74656e75 ('tenu') */
  namespace?: number;
  /** @default silent */
  logger?: Logger;
  /** @default the monotonic clock */
  clock?: Clock;
}

/** @internal the keys of {@link PgLockOptions}. */
export const PG_LOCK_KEYS: OptionKeys<PgLockOptions> = { id: true, ttlMs: true, safetyMarginMs: true, callTimeoutMs: true, namespace: true, logger: true, clock: true, schema: true };

/**
 * Per pool, and per schema NUL name: the backends of this process's own granted sessions whose
 * end it has seen (the lease's signal aborted), the newest 64. See guardSql's `over`.
 */
const endedHere = new WeakMap<Pool, Map<string, number[]>>();

function endedOf(pool: Pool, key: string): number[] {
  let m = endedHere.get(pool);
  if (!m) endedHere.set(pool, (m = new Map()));
  let pids = m.get(key);
  if (!pids) m.set(key, (pids = []));
  return pids;
}

/** How long an acquire waits for its holder row to be written (see #record). */
const CLAIM_MS = 1000;

/** The rows of the last statement of a multi-statement simple query (or of the one `back` statements before it). */
export function lastRows(r: QueryResult | QueryResult[], back = 0): Record<string, unknown>[] {
  const last = Array.isArray(r) ? r[r.length - 1 - back] : back === 0 ? r : undefined;
  return (last?.rows ?? []) as Record<string, unknown>[];
}

/** Throws a ConfigError unless `pool` is a pg Pool (a plain pg.Client cannot pin connections). */
export function requirePool(pool: unknown): Pool {
  if (!pool || typeof (pool as Pool).connect !== 'function' || typeof (pool as Pool).query !== 'function' || typeof (pool as { totalCount?: unknown }).totalCount !== 'number') {
    throw new ConfigError('pool', 'must be a pg Pool (new pg.Pool(...)), not a single pg.Client');
  }
  return pool as Pool;
}

/**
 * A lock for work that spans transactions. `acquire()` pins one client out of the pool for the
 * lease's life (pool churn cannot touch it), opens a transaction on it that lasts the lease (so a
 * transaction pooler pins the server connection too, see session.ts), waits in
 * `pg_advisory_xact_lock`, takes the fence from `tenure_fence_seq` in the same statement, shows
 * everyone who holds it (holder.ts), and aborts the lease's signal if that connection dies.
 * Prefer {@link withXactLock} when the work fits in one transaction. One lock object is one
 * participant: a second `acquire()` while it waits or holds rejects with BusyError.
 *
 * Hazard: without `ttlMs`, a holder that is partitioned away keeps the lock until its TCP
 * connection dies; set `ttlMs` for a lease the server enforces.
 */
export class PgSessionLock extends LeaseEmitter implements AsyncDisposable {
  /** The lock's name. */
  readonly name: string;
  /** This participant's id. */
  readonly id: string;
  /** @internal */
  readonly logger: Logger;
  readonly #pool: Pool;
  readonly #key: AdvisoryKey;
  readonly #tables: TenureTables;
  readonly #timing: PgTiming;
  #held: LeaseController | undefined;
  #busy = false;
  /** The acquire under way, and the row deletions of given-up guarded waits: close() lets them finish. */
  #taking: Promise<unknown> | undefined;
  readonly #forgetting = new Set<Promise<void>>();
  readonly #closing = new AbortController();
  /** schema NUL name: this lock's key in endedHere. */
  readonly #slot: string;

  constructor(pool: Pool, name: string, options?: PgLockOptions) {
    super();
    this.#pool = requirePool(pool);
    this.name = validateName('name', name);
    const o = requireOptions('options', options, PG_LOCK_KEYS);
    this.id = optionalId(o.id);
    this.#timing = pgTiming(o, optionalClock(o.clock));
    this.logger = optionalLogger(o.logger, { component: 'postgres-lock', lock: this.name });
    this.#tables = tenureTables(o.schema);
    this.#key = advisoryKey(this.name, { namespace: o.namespace, schema: this.#tables.schema });
    this.#slot = `${this.#tables.schema}\u0000${this.name}`;
  }

  /** The advisory key this name maps to. */
  get key(): AdvisoryKey {
    return this.#key;
  }

  /** The held Lease, while this object holds the lock. */
  get lease(): Lease | undefined {
    return this.#held && !this.#held.lease.lost ? this.#held.lease : undefined;
  }

  /** Waits for the lock. On abort or timeout the waiting connection is closed (which ends the wait). */
  async acquire(options?: WaitOptions): Promise<Lease> {
    return (await this.#tracked(this.#take(options, false)))!;
  }

  /** One try: the lease, or undefined when another session holds the lock. */
  tryAcquire(options?: WaitOptions): Promise<Lease | undefined> {
    return this.#tracked(this.#take(options, true));
  }

  #tracked<T>(p: Promise<T>): Promise<T> {
    this.#taking = p;
    p.then(
      () => undefined,
      () => undefined,
    ).finally(() => {
      if (this.#taking === p) this.#taking = undefined;
    });
    return p;
  }

  async #take(options: WaitOptions | undefined, tryOnly: boolean): Promise<Lease | undefined> {
    const o = requireOptions('options', options, WAIT_KEYS);
    optionalSignal('signal', o.signal);
    o.signal?.throwIfAborted();
    if (this.#closing.signal.aborted) throw new ClosedError(`postgres lock '${this.name}'`);
    if (this.#busy || this.lease) throw new BusyError(`postgres lock '${this.name}': this lock object already waits or holds (one object is one participant)`);
    this.#busy = true;
    const scope = waitScope(`postgres lock '${this.name}'`, { signal: o.signal ? AbortSignal.any([o.signal, this.#closing.signal]) : this.#closing.signal, timeoutMs: o.timeoutMs });
    let session: PgSession | undefined;
    try {
      const schema = schemaPending(this.#pool, this.#tables, this.#timing.callTimeoutMs);
      if (schema) await raceSignal(schema, scope.signal);
      for (;;) {
        session = await PgSession.create(this.#pool, this.#timing, scope.signal);
        const s = session;
        const sentAt = this.#timing.clock.now();
        // The lock is the transaction's (see session.ts: a session-level lock broke behind a
        // transaction pooler); the fence comes after the grant, in the same statement.
        const guarded = this.#timing.ttlMs !== undefined;
        const before = recordBefore(s.client, this.#tables, this.name, this.id, guarded);
        const over = guarded ? endedOf(this.#pool, this.#slot) : [];
        const q = s.query(before + s.lockSql(takeSql(this.#key, tryOnly, this.#tables)) + (guarded ? `; ${guardSql(s.client, this.#tables, this.name, over)}` : ''));
        // A try answers at once, so it is bounded like any call; a wait is bounded by the caller.
        const answered = tryOnly ? queryWithin(q, this.#timing.callTimeoutMs, `postgres lock '${this.name}': tryAcquire`, pgEndpoint(this.#pool), () => void s.close(true)) : q;
        const r = await raceSignal(answered, scope.signal).catch(async (e: unknown) => {
          answered.catch(() => undefined);
          if (scope.signal.aborted) {
            const waiter = (s.client as { processID?: unknown }).processID;
            await settledWithin(s.abandon(q), ABANDON_GRACE_MS);
            // A guarded waiter that gave up never held: its row must not make the next grantee wait.
            if (guarded && typeof waiter === 'number') {
              const forget = this.#bounded(this.#pool.query(forgetSql(this.#tables), [this.name, waiter]), 'forget a waiter that gave up');
              this.#forgetting.add(forget);
              void forget.finally(() => this.#forgetting.delete(forget));
            }
          }
          throw toTenureError(e, `postgres lock '${this.name}': acquire`, pgEndpoint(this.#pool), scope.signal);
        });
        const row = lastRows(r, guarded ? 1 : 0)[0] as { fence: string; pid: number } | undefined;
        if (row === undefined) {
          if (guarded) s.endWith(releaseSql(s.client, this.#tables, this.name)); // a try that took nothing keeps no row
          await s.close();
          return undefined;
        }
        const fence = row.fence;
        if (mustRecord(s.client, row.pid, this.#tables, this.name, this.id, before !== '')) await this.#record(row.pid);
        // A grant with a heartbeat period of its lease still ahead is the holder's as it is (no
        // await on the hot path). One that waited longer is confirmed first: counted from the
        // send of its request, it would be handed out with its deadline about to pass (a waiter
        // granted 1.5 s into a 2 s lease lost it before its command had started).
        const from = this.#live(s, sentAt, heartbeatMs(this.#timing.ttlMs ?? 0)) ? sentAt : await raceSignal(this.#confirm(s), scope.signal);
        if (from === undefined) {
          await s.close(true);
          session = undefined;
          if (tryOnly) return undefined; // a try took nothing; a wait goes on
          continue;
        }
        s.startHeartbeat(from);
        if (guarded) {
          const guard = lastRows(r)[0] as { dead: boolean; up_ms: string } | undefined;
          if (!(await this.#outwait(s, guard, row.pid, scope.signal))) {
            await s.close(true);
            session = undefined;
            if (tryOnly) return undefined;
            continue;
          }
          s.endWith(releaseSql(s.client, this.#tables, this.name));
        }
        const ctl = this.#lease(s, BigInt(fence));
        if (guarded && (s.client as { processID?: unknown }).processID === row.pid) {
          // This process sees this lease end: its backend's row is then no reason for its own next grant to wait.
          const pid = row.pid;
          ctl.onEnd(() => {
            const pids = endedOf(this.#pool, this.#slot);
            if (!pids.includes(pid)) pids.push(pid);
            if (pids.length > 64) pids.shift();
          });
        }
        if (this.#closing.signal.aborted) await ctl.release();
        return this.announce(ctl.lease);
      }
    } catch (e) {
      await session?.close(true);
      throw e;
    } finally {
      this.#busy = false;
      scope.dispose();
    }
  }

  /**
   * When the lease's deadline counts from, for a grant that came back with less than a heartbeat
   * period of its lease left, or none (a long wait, a process frozen or a reply held in a
   * partition on the way). It is the holder's only while its transaction lives, and the server
   * may have timed that out and granted the lock to another: one more round trip on the
   * connection proves it does (and resets the server's idle timer), and the deadline counts from
   * that round trip's send. Undefined: the grant is lost (it was never handed out).
   */
  async #confirm(session: PgSession): Promise<number | undefined> {
    const from = this.#timing.clock.now();
    const answered = await queryWithin(session.query('SELECT 1'), this.#timing.callTimeoutMs, `postgres lock '${this.name}': confirm a late grant`, pgEndpoint(this.#pool)).then(
      () => true,
      () => false,
    );
    return answered && this.#live(session, from) ? from : undefined;
  }

  /**
   * The guard (holder.ts, guardSql): a grant that may follow a holder who still believes it holds
   * — a participant whose backend died (its row is there: it may have died holding, on a cut link
   * or a crash) or a server up for less than a lease — is handed out only after the longest such
   * holder's local deadline can have passed: `ttlMs − safetyMarginMs` from now (every participant
   * of a name uses the same `ttlMs`; their deadlines counted from a send before the loss, and now
   * is after it), heartbeating meanwhile. Then the dead rows are tidied away. False: the grant was
   * lost while it waited.
   */
  async #outwait(session: PgSession, guard: { dead: boolean; up_ms: string } | undefined, pid: number, signal: AbortSignal): Promise<boolean> {
    const { ttlMs, safetyMarginMs } = this.#timing;
    const span = ttlMs! - safetyMarginMs!;
    const ms = Math.max(guard?.dead === false ? 0 : span, span - Number(guard?.up_ms ?? 0));
    if (ms <= 0) return true;
    this.logger.debug({ waitMs: Math.round(ms), dead: guard?.dead, upMs: guard?.up_ms }, 'postgres lock: granted after a holder may have been lost; waiting out its lease before handing it out');
    await sleep(ms, AbortSignal.any([signal, session.signal])).catch((e: unknown) => {
      if (signal.aborted) throw e;
    });
    if (session.signal.aborted) return false;
    if (guard?.dead !== false) await this.#bounded(this.#pool.query(tidySql(this.#tables), [this.name, pid]), 'tidy the rows it waited out');
    return true;
  }

  /** Best effort, within CLAIM_MS: a pool whose every connection waits for this very lock must not keep a holder from its lease. */
  async #bounded(write: Promise<unknown>, what: string): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const bound = new Promise<void>((resolve) => (timer = setTimeout(resolve, CLAIM_MS)));
    await Promise.race([write.then(() => undefined), bound])
      .catch((e: unknown) => this.logger.debug({ err: e }, `postgres lock: could not ${what}`))
      .finally(() => clearTimeout(timer));
    write.catch(() => undefined);
  }

  /**
   * Whether a lease counted from `from` has more than `aheadMs` left before its local deadline
   * (always, without ttlMs).
   */
  #live(session: PgSession, from: number, aheadMs = 0): boolean {
    const { ttlMs, safetyMarginMs, clock } = this.#timing;
    if (ttlMs === undefined || safetyMarginMs === undefined) return true;
    return !session.signal.aborted && clock.now() + aheadMs < from + ttlMs - safetyMarginMs;
  }

  /**
   * The lease of the lock held on `session`: its signal derives from the session's, its release
   * rolls the lock's transaction back and returns the connection (or destroys it if that fails,
   * so a client holding a lock never goes back to the pool).
   */
  #lease(session: PgSession, fence: bigint): LeaseController {
    const ctl: LeaseController = new LeaseController({
      name: this.name,
      fence,
      parent: session.signal,
      deadline: () => session.deadline,
      clock: this.#timing.clock,
      logger: this.logger,
      // The lock is the transaction's: close() rolls it back (bounded; past the bound the
      // connection is destroyed and the server drops the lock with it).
      release: async () => {
        if (this.#held === ctl) this.#held = undefined;
        await session.close(session.signal.aborted);
      },
    });
    ctl.onEnd(() => {
      if (this.#held === ctl) this.#held = undefined;
    });
    this.#held = ctl;
    return ctl;
  }

  /**
   * Writes this participant's row for backend `pid` (see holder.ts: only when a client that
   * looked like it owned its backend was granted the lock by another one, as behind a pooler that
   * passes a backend's key through). Its own short transaction on the pool, bounded: a pool whose
   * every connection waits for this very lock must not keep the holder from its lease; a row not
   * written makes `holder()` show `pid:<pid>`, nothing worse.
   */
  async #record(pid: number): Promise<void> {
    await this.#bounded(this.#pool.query(recordSql(this.#tables), [this.name, pid, this.id]), 'record the holder');
  }

  /**
   * Who holds the lock now, read from the store (see holder.ts): the holder's id and fence, or
   * undefined when nobody does. A holder that took the same key another way (an xact lock of the
   * same name) is reported with id `pid:<backend pid>` and no fence.
   */
  async holder(options?: WaitOptions): Promise<LeaderInfo | undefined> {
    const o = requireOptions('options', options, WAIT_KEYS);
    const scope = waitScope(`postgres lock '${this.name}': holder`, { signal: optionalSignal('signal', o.signal), timeoutMs: o.timeoutMs });
    try {
      const schema = schemaPending(this.#pool, this.#tables, this.#timing.callTimeoutMs);
      if (schema) await raceSignal(schema, scope.signal);
      const r = await queryWithin(
        this.#pool.query(holderSql(this.#tables), [this.name, this.#key.namespace >>> 0, this.#key.key >>> 0]),
        this.#timing.callTimeoutMs,
        `postgres lock '${this.name}': holder`,
        pgEndpoint(this.#pool),
      );
      return holderOf(r.rows[0] as Parameters<typeof holderOf>[0]);
    } finally {
      scope.dispose();
    }
  }

  /** Aborts a pending acquire (ClosedError), releases a held lease, refuses further use. Idempotent. */
  async close(): Promise<void> {
    if (!this.#closing.signal.aborted) this.#closing.abort(new ClosedError(`postgres lock '${this.name}'`));
    // A wait the close ended settles within ABANDON_GRACE_MS; a guarded one then deletes its row
    // (bounded): a process that exits right after close() must not leave it for the next grantee to wait out.
    if (this.#taking) await settledWithin(this.#taking, ABANDON_GRACE_MS + 100);
    await this.#held?.release().catch(() => undefined);
    if (this.#forgetting.size > 0) await Promise.all([...this.#forgetting]);
  }

  /** Same as `close()`, for `await using`. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }
}
