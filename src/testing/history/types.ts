/**
 * The history format the checker reads: Jepsen's idea of a log of operations, each an
 * `invoke` followed by its completion (`ok`, `fail`, or `info` when the outcome is unknown), plus
 * what happened around them (term ends, local deadlines, faults), every entry stamped with the
 * system-wide monotonic clock (`process.hrtime.bigint()`, CLOCK_MONOTONIC on Linux), so entries
 * logged by different processes on one machine can be ordered.
 */

/** `invoke` starts an operation; `ok`, `fail` and `info` (outcome unknown) end it; lone facts are `info`. */
export type OpType = 'invoke' | 'ok' | 'fail' | 'info';

/**
 * What an entry is about:
 * - `acquire`: campaign/acquire (its `ok` carries the term's `fence`);
 * - `write`: a fenced write of `id` to `register` with `fence`;
 * - `release`: resign/release of the term with `fence`;
 * - `term-end` (info): the holder's signal aborted (its own view of the end), with `reason`;
 * - `deadline` (info): the holder's local deadline for term `fence` is now `deadline`;
 * - `fault` (info): the nemesis started (`phase: 'start'`) or healed (`'end'`) a fault of kind `fault`.
 */
export type OpFunction = 'acquire' | 'write' | 'release' | 'term-end' | 'deadline' | 'fault';

/** One entry of a history. */
export interface HistoryOp {
  /** Nanoseconds on CLOCK_MONOTONIC (`process.hrtime.bigint()`), taken where it happened. */
  t: bigint;
  /** Who: one name per process incarnation (a restarted candidate gets a new name), or the nemesis. */
  process: string;
  /** `invoke`, `ok`, `fail` or `info`. */
  type: OpType;
  /** What the entry is about (see {@link OpFunction}). */
  f: OpFunction;
  /** The term's fence (acquire ok, write, release, term-end, deadline). */
  fence?: bigint;
  /** write: the register written to. */
  register?: string;
  /** write: a unique id of the write, as the register logs it. */
  id?: string;
  /** deadline: the local deadline in CLOCK_MONOTONIC ns. */
  deadline?: bigint;
  /**
   * fault: its kind. Two kinds mean something to the checker: `kill` (the `target` process died
   * at `t`) and `pause` (the `target` was frozen from the `start` to the `end` entry).
   */
  fault?: string;
  /** fault: whether it started or healed. */
  phase?: 'start' | 'end';
  /** fault: the process it was done to, when it was done to one. */
  target?: string;
  /** fail/info/term-end: why. */
  error?: string;
  /** write fail: the resource refused the fence as stale (`StaleFenceError`). */
  stale?: boolean;
  /**
   * The shard the entry is about, in a ShardManager's history (see `HistoryRecorder.forShard`):
   * the checker applies its rules to each shard's entries on their own, with every fault.
   */
  shard?: string;
}

/** A register's own record of one write it accepted. */
export interface RegisterEntry {
  /** The write's id. */
  id: string;
  /** The fence it carried. */
  fence: bigint;
}

/** What the checker reads. */
export interface History {
  /** Every process's entries (any order: the checker sorts by `t`). */
  ops: HistoryOp[];
  /** Each register's own log of the writes it accepted, in the order it accepted them. */
  registers?: Record<string, RegisterEntry[]>;
  /** What the store still held once everyone had left: lock keys, znodes, leases, advisory locks. */
  leftovers?: string[];
}

/** The checker's rules, one name each. */
export type CheckRule =
  /** A register accepted a fence below one it had accepted before. */
  | 'fence-order'
  /** A write invoked after its holder's term had ended was acknowledged though a higher fence had been. */
  | 'stale-write'
  /** Two holders were inside live terms at once (and no pause with rejected writes excuses it). */
  | 'overlap'
  /** Two acquisitions were granted the same fence. */
  | 'fence-reuse'
  /** After a holder crashed, nobody was granted the term within the bound. */
  | 'failover'
  /** The store still held a lock, znode, lease or advisory lock at the end. */
  | 'leak'
  /** An acknowledged write is missing from its register's log (or a refused one is in it). */
  | 'lost-write';

/** One broken rule, found by {@link checkHistory}. */
export interface Violation {
  /** Which rule. */
  rule: CheckRule;
  /** What happened, in words. */
  message: string;
  /** When it happened (CLOCK_MONOTONIC ns), when there is one instant. */
  t?: bigint;
  /** The shard it happened on, in a sharded history. */
  shard?: string;
}

/** A reconstructed term: from the grant to its end by the holder's own log. */
export interface HistoryTerm {
  /** The holder. */
  process: string;
  /** The term's fence. */
  fence: bigint;
  /** When it was granted (CLOCK_MONOTONIC ns). */
  start: bigint;
  /** min(signal aborted, last local deadline, crash); the end of the history when none came. */
  end: bigint;
  /** How it ended: the term-end reason, `deadline`, `crash`, or `open`. */
  endedBy: string;
  /** The shard, in a sharded history. */
  shard?: string;
}

/**
 * Time from what ended a term to the next grant: to another process, or to anyone when the fault
 * was done to the store itself. The cause is the last fault done to the holder (or the store)
 * before its term ended, `release`, or `unprovoked` when the term was lost without any fault.
 */
export interface Failover {
  /** The fault kind, `release` or `unprovoked`. */
  cause: string;
  /** The process whose term ended. */
  from: string;
  /** The process granted next. */
  to: string;
  /** From the end of the term to the next grant, in ms. */
  ms: number;
  /** The shard, in a sharded history. */
  shard?: string;
}

/** Counts over a history, for reports. */
export interface CheckStats {
  /** Invoked operations by function, with how they ended. */
  operations: Record<
    string,
    {
      /** Operations invoked. */
      invoked: number;
      /** Ended `ok`. */
      ok: number;
      /** Ended `fail`. */
      fail: number;
      /** Ended `info` (outcome unknown). */
      info: number;
    }
  >;
  /** Writes refused for a stale fence. */
  staleRejected: number;
  /** Writes acknowledged. */
  writesAcknowledged: number;
  /** Terms granted. */
  terms: number;
  /** Terms won per process. */
  termsByProcess: Record<string, number>;
  /** Faults started, by kind. */
  faults: Record<string, number>;
  /** Failovers: each fault that ended the holder's term, and each release, to the next grant (see {@link Failover}). */
  failovers: Failover[];
  /** Faults done while someone held the term (to the holder, or to the store) that ended no term, by kind. */
  survived: Record<string, number>;
  /** Overlaps excused because one holder was paused and none of its writes in the overlap was accepted. */
  excusedOverlaps: number;
}

/** What {@link checkHistory} found. */
export interface CheckResult {
  /** True when there is no violation. */
  valid: boolean;
  /** Every broken rule, in time order. */
  violations: Violation[];
  /** Counts over the history. */
  stats: CheckStats;
  /** The terms, reconstructed. */
  terms: HistoryTerm[];
}

/** Options of {@link checkHistory}. */
export interface CheckOptions {
  /**
   * Longest time (ms) from a holder's crash (`kill` fault) to the next grant to another process:
   * the TTL or session timeout plus a bound. Omit to skip the rule.
   */
  failoverBoundMs?: number;
}
