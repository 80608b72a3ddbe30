import { nodeName, queuedSequence, stripProtected } from './paths.js';

/**
 * What a driver answers for one node of the queue. `lastAhead`: the watched node is the only one
 * standing between ours and the lock, so once it is deleted ours holds without a new listing (a
 * node created later has a higher sequence and queues behind ours): the hand-off is the deletion's
 * notification alone, not the notification and a listing's round trip.
 */
export type DriverVerdict = { holds: true } | { holds: false; watch: string; lastAhead?: boolean };

/**
 * A lock driver answers one question: given every queued node (names sorted by sequence) and
 * ours, do we hold the lock, and if not, which single node do we watch? The lock internals do the
 * rest (create, wait, claim, clean up).
 */
export interface LockDriver {
  /** The name prefix of nodes this driver creates, e.g. `lock-`. */
  readonly lockName: string;
  /** Prefixes of every node that takes part in this queue (for a rw-lock: reads and writes). */
  readonly queueNames: readonly string[];
  check(sorted: readonly string[], ours: string): DriverVerdict;
  /**
   * The same verdict from the children as ZooKeeper lists them (unsorted), when the driver can
   * answer in one pass: the internals then skip the sort.
   */
  checkChildren?(children: readonly string[], ours: string): DriverVerdict;
}

function indexOf(sorted: readonly string[], ours: string): number {
  const i = sorted.indexOf(nodeName(ours));
  if (i < 0) throw new NodeGoneError(ours);
  return i;
}

/** Our node is not in the queue any more (its session ended). */
export class NodeGoneError extends Error {
  constructor(readonly path: string) {
    super(`lock node ${path} is gone`);
    this.name = 'NodeGoneError';
  }
}

/**
 * The first `maxHolders` nodes hold; a waiter watches its immediate predecessor (for 1 holder,
 * the mutex and the latch).
 */
export class StandardLockDriver implements LockDriver {
  readonly queueNames: readonly string[];
  constructor(readonly lockName = 'lock-', queueNames?: readonly string[]) {
    this.queueNames = queueNames ?? [lockName];
  }

  check(sorted: readonly string[], ours: string): DriverVerdict {
    const i = indexOf(sorted, ours);
    return i === 0 ? { holds: true } : { holds: false, watch: sorted[i - 1]!, lastAhead: i === 1 };
  }

  /**
   * One pass, no sort: the predecessor is the queued node with the highest sequence below ours.
   * Every joiner reads every child, so with 1,000 participants sorting each listing was most of
   * the client's queueing time.
   */
  checkChildren(children: readonly string[], ours: string): DriverVerdict {
    const mine = nodeName(ours);
    const mySeq = queuedSequence(mine, this.queueNames);
    let found = false;
    let pred: string | undefined;
    let predSeq = -1;
    let ahead = 0;
    for (const c of children) {
      if (c === mine) {
        found = true;
        continue;
      }
      const seq = queuedSequence(c, this.queueNames);
      if (seq >= 0 && seq < mySeq) {
        ahead++;
        if (seq > predSeq) {
          pred = c;
          predSeq = seq;
        }
      }
    }
    if (!found || mySeq < 0) throw new NodeGoneError(ours);
    return pred === undefined ? { holds: true } : { holds: false, watch: pred, lastAhead: ahead === 1 };
  }
}

export const READ_NAME = 'READ-';
export const WRITE_NAME = 'WRIT-';
/** A read node created while the same owner holds the write lock (write→read downgrade). */
export const DOWNGRADE_NAME = 'DOWN-';
const RW_QUEUE = [READ_NAME, WRITE_NAME, DOWNGRADE_NAME] as const;
const is = (n: string, prefix: string): boolean => stripProtected(n).startsWith(prefix);

/**
 * A writer holds when it is first in the queue and no downgraded read node exists; otherwise it
 * watches its immediate predecessor (or the downgraded reader, which may sit behind it).
 */
export class WriteLockDriver implements LockDriver {
  readonly lockName = WRITE_NAME;
  readonly queueNames = RW_QUEUE;

  check(sorted: readonly string[], ours: string): DriverVerdict {
    const i = indexOf(sorted, ours);
    const down = sorted.find((n) => is(n, DOWNGRADE_NAME));
    if (down !== undefined) return { holds: false, watch: down };
    return i === 0 ? { holds: true } : { holds: false, watch: sorted[i - 1]! };
  }
}

/**
 * A reader holds when no writer is queued before it (it watches the nearest one otherwise). A
 * downgraded reader (created while its owner holds the write lock) holds at once.
 */
export class ReadLockDriver implements LockDriver {
  readonly queueNames = RW_QUEUE;
  constructor(readonly lockName: string = READ_NAME) {}

  check(sorted: readonly string[], ours: string): DriverVerdict {
    const i = indexOf(sorted, ours);
    if (this.lockName === DOWNGRADE_NAME) return { holds: true };
    for (let j = i - 1; j >= 0; j--) {
      const n = sorted[j]!;
      if (is(n, WRITE_NAME)) return { holds: false, watch: n };
    }
    return { holds: true };
  }
}
