import type { WaitOptions } from './options.js';

/** One live member of a group, as every member and observer sees it. */
export interface Member {
  /** The member's id (unique in the group: a second live member with the same id is refused). */
  readonly id: string;
  /** Its share of the work relative to the others (weighted rendezvous hashing). */
  readonly weight: number;
}

/**
 * The live members of a group, on any store: an etcd key on the session's lease, a ZooKeeper
 * ephemeral node, a Redis key renewed by its watchdog, a Postgres row believed only while its
 * pinned connection (the member's lease) holds the group's shared advisory lock. A member is in
 * the set exactly as long as the liveness its backend's sessions have: a process that is killed,
 * frozen or cut off drops out once its lease ends at the store (its TTL, or at once for a
 * closed connection). `ShardManager` is written against this interface only. Every
 * implementation passes the one contract suite (test/contract/membership.ts):
 *
 * - `join()` resolves once this member is in the store's set; it rejects with BusyError when
 *   another live member has the same id. Joined, the member stays in the set until `leave()`:
 *   after its session or lease is lost it joins again by itself on the next one.
 * - `members()` reads the live set, sorted by id; `observe()` yields it first, then every change.
 * - `leave()` takes the member out at once and for good (ClosedError afterwards); idempotent.
 */
export interface Membership extends AsyncDisposable {
  /** The group's name (an etcd prefix, a ZooKeeper path, a Redis or Postgres group name). */
  readonly group: string;
  /** This member's id. */
  readonly id: string;
  /** This member's weight. */
  readonly weight: number;
  /** True while this member is in the store's set by its own session (joined, and that join's liveness holds). */
  readonly joined: boolean;
  /** Joins the group; resolves once in the set (at once when joined already). */
  join(options?: WaitOptions): Promise<void>;
  /** The live members, read from the store, sorted by id. Works without joining. */
  members(options?: WaitOptions): Promise<Member[]>;
  /**
   * The live set as an async iterator: the current members first, then the set after every
   * change (sorted by id). Works without joining. Ends (rejects with `signal.reason`) when
   * `signal` aborts.
   */
  observe(options?: { signal?: AbortSignal }): AsyncGenerator<readonly Member[], void, undefined>;
  /** Leaves the group at once and for good; idempotent. */
  leave(): Promise<void>;
}

/** Sorted by id, one entry per id (the first one the store listed wins). */
export function normalizeMembers(list: Iterable<Member>): Member[] {
  const byId = new Map<string, Member>();
  for (const m of list) if (!byId.has(m.id)) byId.set(m.id, Object.freeze({ id: m.id, weight: m.weight }));
  return [...byId.values()].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
}

/** Whether two normalized sets are the same (ids and weights). */
export function sameMembers(a: readonly Member[] | undefined, b: readonly Member[] | undefined): boolean {
  if (a === undefined || b === undefined) return a === b;
  return a.length === b.length && a.every((m, i) => m.id === b[i]!.id && m.weight === b[i]!.weight);
}

/** A member as the stores keep it: `{"id":…,"weight":…}`. */
export function memberValue(m: Member): string {
  return JSON.stringify({ id: m.id, weight: m.weight });
}

/** A stored member, or undefined for anything else (a key or node that is not a member's). */
export function parseMember(text: string): Member | undefined {
  try {
    const v = JSON.parse(text) as unknown;
    if (v === null || typeof v !== 'object') return undefined;
    const { id, weight } = v as { id?: unknown; weight?: unknown };
    if (typeof id !== 'string' || typeof weight !== 'number' || !(weight > 0) || !Number.isFinite(weight)) return undefined;
    return { id, weight };
  } catch {
    return undefined;
  }
}
