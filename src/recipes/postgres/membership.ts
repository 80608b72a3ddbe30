import type { Pool } from 'pg';
import { raceSignal, sleepQuietly } from '../../core/abort.js';
import { BusyError } from '../../core/errors.js';
import { memberValue, normalizeMembers, parseMember, sameMembers, type Member } from '../../core/membership.js';
import { observeByReading } from '../../core/observe.js';
import { optionalClock, optionalLogger, type Logger } from '../../core/options.js';
import { optionalWeight, StoreMembership, type MembershipDriver } from '../../core/store-membership.js';
import { optionalId, optionalNumber, requireOptions } from '../../core/validate.js';
import { pgEndpoint, queryWithin, toTenureError } from './errors.js';
import { recordSql, releaseSql } from './holder.js';
import { advisoryKey, keyArgs, validateName, type AdvisoryKey } from './keys.js';
import { schemaPending, tenureTables, type TenureTables } from './schema.js';
import { PgSession, pgTiming, type PgTiming } from './session.js';
import { lastRows, PG_LOCK_KEYS, requirePool, type PgLockOptions } from './session-lock.js';

/** Options of a {@link PgMembership}: a member's lease is a PgSessionLock's (`ttlMs` etc.). */
export interface PgMembershipOptions extends PgLockOptions {
  /** Its share of the work relative to the other members (> 0). @default 1 */
  weight?: number;
  /** Time between two reads of the set in `observe()`. @default 1000 */
  observeIntervalMs?: number;
}

/**
 * Group membership on Postgres, on the lease a PgSessionLock keeps: each member pins one
 * connection from the pool and holds, in a transaction kept open on it (so a transaction pooler
 * pins the backend too), the group's advisory lock **shared** (every member holds it at once); its
 * `{"id","weight"}` is a row of `tenure_holder` keyed by that backend's pid. A row counts only
 * while its backend holds the group's lock, so a member is in the set exactly as long as its
 * pinned connection lives: one whose process dies drops out when its connection closes (at once
 * for a killed process), one that freezes or is cut off drops out after `ttlMs` (the server's
 * `idle_in_transaction_session_timeout`; without `ttlMs`, when TCP gives up). After its connection
 * is lost the member joins again on a new one. Observers re-read every `observeIntervalMs`.
 * Each member holds one connection of `pool` while joined; reads take another briefly.
 */
export class PgMembership extends StoreMembership {
  constructor(pool: Pool, group: string, options?: PgMembershipOptions) {
    const p = requirePool(pool);
    const name = validateName('group', group);
    const o = requireOptions('options', options, { ...PG_LOCK_KEYS, weight: true, observeIntervalMs: true });
    const id = optionalId(o.id);
    const weight = optionalWeight(o.weight);
    const clock = optionalClock(o.clock);
    const timing = pgTiming(o, clock);
    const tables = tenureTables(o.schema);
    // A name no lock of the user's can have by accident: the group's own key and rows.
    const internal = `\u0001members\u0001${name}`;
    const key = advisoryKey(internal, { namespace: o.namespace, schema: tables.schema });
    const intervalMs = optionalNumber('observeIntervalMs', o.observeIntervalMs, 1000, { min: 10, max: 2 ** 31 - 1 });
    const logger = optionalLogger(o.logger, { component: 'postgres-membership', group: name, id });
    super(name, id, weight, new PgMembers(p, name, internal, key, tables, timing, { id, weight }, intervalMs, logger));
  }
}

/** The driver: the group's advisory lock held shared on a pinned session, and a holder row for its pid. */
class PgMembers implements MembershipDriver {
  readonly what: string;
  readonly logger: Logger;
  readonly #pool: Pool;
  readonly #name: string;
  readonly #key: AdvisoryKey;
  readonly #t: TenureTables;
  readonly #timing: PgTiming;
  readonly #me: Member;
  readonly #value: string;
  readonly #intervalMs: number;
  #mine: { session: PgSession; pid: number } | undefined;

  constructor(pool: Pool, group: string, name: string, key: AdvisoryKey, t: TenureTables, timing: PgTiming, me: Member, intervalMs: number, logger: Logger) {
    this.what = `postgres membership '${group}'`;
    this.logger = logger;
    this.#pool = pool;
    this.#name = name;
    this.#key = key;
    this.#t = t;
    this.#timing = timing;
    this.#me = me;
    this.#value = memberValue(me);
    this.#intervalMs = intervalMs;
  }

  #query(sql: string, params: unknown[], what: string) {
    return queryWithin(this.#pool.query(sql, params), this.#timing.callTimeoutMs, `${this.what}: ${what}`, pgEndpoint(this.#pool));
  }

  async enter(signal: AbortSignal): Promise<AbortSignal> {
    await this.exit().catch(() => undefined); // the entry of a lost connection
    const schema = schemaPending(this.#pool, this.#t, this.#timing.callTimeoutMs);
    if (schema) await raceSignal(schema, signal);
    const session = await PgSession.create(this.#pool, this.#timing, signal);
    try {
      const sentAt = this.#timing.clock.now();
      const take = session.query(session.lockSql(`SELECT pg_advisory_xact_lock_shared(${keyArgs(this.#key)}), pg_backend_pid() AS pid`));
      const r = await raceSignal(queryWithin(take, this.#timing.callTimeoutMs, `${this.what}: join`, pgEndpoint(this.#pool)), signal);
      const pid = (lastRows(r)[0] as { pid: number }).pid;
      session.startHeartbeat(sentAt);
      // The row is committed on its own (the lock's transaction never commits), for the backend
      // that holds the lock (behind a transaction pooler it may not be the first one we saw).
      await raceSignal(this.#query(`WITH gone AS (DELETE FROM ${this.#t.holder} h WHERE h.name = $1 AND NOT EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.pid = h.pid)) ${recordSql(this.#t)}`, [this.#name, pid, this.#value], 'join'), signal);
      if ((await raceSignal(this.#live(), signal)).some((r) => r.pid !== pid && r.member.id === this.#me.id)) throw new BusyError(`${this.what}: '${this.#me.id}' is already a live member; ids are unique in a group`);
      this.#mine = { session, pid };
      return session.signal;
    } catch (e) {
      if (e instanceof BusyError) {
        // Refused, the store answering: its row and its hold go in one commit before the refusal
        // is out. A destroyed connection's backend holds the lock a moment longer, and the
        // refused member was then read as a live one (by itself, its twin's weight).
        session.endWith(releaseSql(session.client, this.#t, this.#name));
        await session.close();
      } else await session.close(true);
      throw toTenureError(e, `${this.what}: join`, pgEndpoint(this.#pool));
    }
  }

  async exit(): Promise<void> {
    const mine = this.#mine;
    this.#mine = undefined;
    if (!mine) return;
    // Destroyed, not returned: the backend goes, so no later member on it can meet this row.
    await mine.session.close(true);
    await this.#query(`DELETE FROM ${this.#t.holder} WHERE name = $1 AND pid = $2 AND holder_id = $3`, [this.#name, mine.pid, this.#value], 'leave').catch(() => undefined);
  }

  /** Holder rows of the group whose backend holds the group's lock now. */
  async #live(): Promise<{ pid: number; member: Member }[]> {
    const schema = schemaPending(this.#pool, this.#t, this.#timing.callTimeoutMs);
    if (schema) await schema;
    const r = await this.#query(
      `SELECT h.pid, h.holder_id FROM ${this.#t.holder} h WHERE h.name = $1 AND EXISTS (
      SELECT 1 FROM pg_locks l WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2
        AND l.classid::bigint = $2 AND l.objid::bigint = $3 AND l.pid = h.pid
        AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()))`,
      [this.#name, this.#key.namespace >>> 0, this.#key.key >>> 0],
      'members',
    );
    const out: { pid: number; member: Member }[] = [];
    for (const row of r.rows as { pid: number; holder_id: string }[]) {
      const member = parseMember(row.holder_id);
      if (member) out.push({ pid: row.pid, member });
    }
    return out;
  }

  async read(): Promise<Member[]> {
    return normalizeMembers((await this.#live()).map((r) => r.member));
  }

  watch(signal: AbortSignal): AsyncGenerator<Member[], void, undefined> {
    return observeByReading<Member[]>({ read: () => this.read(), same: sameMembers, changed: sleepQuietly, intervalMs: this.#intervalMs, retryable: () => true, logger: this.logger }, signal);
  }
}
