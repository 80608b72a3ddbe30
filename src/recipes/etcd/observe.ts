import type { Etcd3, IKeyValue } from 'etcd3';
import { retryUntil } from '../../core/backoff.js';
import type { LeaderInfo } from '../../core/candidate.js';
import { isAbortReason } from '../../core/abort.js';
import type { Logger } from '../../core/options.js';
import { callWithin } from './client.js';
import { retryableEtcdError, toTenureError } from './errors.js';
import { prefixEnd } from './kv.js';
import { refuseNested } from './names.js';
import { etcd3 } from './peer.js';
import { watchKey, type KeyWatch } from './watch-stream.js';

/** Who leads an etcd election, as an observer sees it. */
export interface EtcdLeaderInfo extends LeaderInfo {
  /** The leader's id: its value as UTF-8 (what it campaigned or last proclaimed with). */
  readonly id: string;
  /** The leader's value as stored (what `etcdctl elect -l` prints). */
  readonly value: Buffer;
  /** The leader's key, `<name>/<lease id hex>`. */
  readonly key: string;
  /** Its place in the queue. */
  readonly createRevision: bigint;
  /** Revision of its last put (the claim or the latest proclaim). */
  readonly modRevision: bigint;
  /**
   * The term's fence: the revision of the put that claimed leadership (the key's 2nd version).
   * Undefined when that history was compacted away.
   */
  readonly fence: bigint | undefined;
}

/** Finds the revision of the key's 2nd version (its claim) by bisecting its history. */
async function claimRevision(client: Etcd3, kv: IKeyValue): Promise<bigint | undefined> {
  if (kv.version === '2') return BigInt(kv.mod_revision);
  let lo = BigInt(kv.create_revision) + 1n;
  let hi = BigInt(kv.mod_revision);
  try {
    while (lo < hi) {
      const mid = (lo + hi) / 2n;
      const r = await client.kv.range({ key: kv.key, revision: String(mid) }, callWithin(2000));
      const v = r.kvs[0];
      if (v && v.create_revision === kv.create_revision && Number(v.version) >= 2) hi = mid;
      else lo = mid + 1n;
    }
    return lo;
  } catch {
    return undefined; // compacted or unreachable: the fence is unknown, not wrong
  }
}

/**
 * The leader under `prefix` at one revision: the head of the queue once it has claimed (a head
 * whose key is still at version 1 is about to claim or resign: nobody leads yet).
 */
export async function readLeader(client: Etcd3, prefix: Buffer): Promise<{ leader: EtcdLeaderInfo | undefined; head: IKeyValue | undefined; revision: bigint }> {
  const res = await client.kv.range(
    { key: prefix, range_end: prefixEnd(prefix), sort_order: etcd3.SortOrder.Ascend, sort_target: etcd3.SortTarget.Create, limit: 1 },
    callWithin(5000),
  );
  const kv = res.kvs[0];
  const revision = BigInt(res.header.revision);
  if (!kv) return { leader: undefined, head: undefined, revision };
  refuseNested(prefix, kv.key);
  if (kv.version === '1') return { leader: undefined, head: kv, revision };
  return { revision, head: kv, leader: leaderOf(kv, await claimRevision(client, kv)) };
}

/** The leader a head key describes. */
export function leaderOf(kv: IKeyValue, fence: bigint | undefined): EtcdLeaderInfo {
  return { id: kv.value.toString('utf8'), value: kv.value, key: kv.key.toString(), createRevision: BigInt(kv.create_revision), modRevision: BigInt(kv.mod_revision), fence };
}

/** Waits for the first event on a key (or under a prefix) from `fromRev`. */
export async function nextChange(client: Etcd3, key: Buffer, fromRev: bigint, prefix: boolean, signal: AbortSignal): Promise<void> {
  signal.throwIfAborted(); // (an abort during the read before: no 'abort' event will come)
  let w: KeyWatch | undefined;
  let onAbort: (() => void) | undefined;
  try {
    await new Promise<void>((resolve, reject) => {
      onAbort = () => reject(signal.reason);
      signal.addEventListener('abort', onAbort, { once: true });
      w = watchKey(client, { key, rangeEnd: prefix ? prefixEnd(key) : undefined, startRevision: fromRev }, {
        event: () => resolve(),
        failed: () => resolve(), // re-read; the loop retries
      });
    });
  } finally {
    if (onAbort) signal.removeEventListener('abort', onAbort);
    w?.cancel();
  }
}

function changed(a: EtcdLeaderInfo | undefined, b: EtcdLeaderInfo | undefined): boolean {
  if (a === undefined || b === undefined) return a !== b;
  return a.key !== b.key || a.createRevision !== b.createRevision || !a.value.equals(b.value);
}

/**
 * Leader changes under `prefix` as an async iterator: the current leader first (undefined when
 * nobody leads), then every new leader, every newly proclaimed value (a proclaim of the value the
 * leader already has is not a change) and every time nobody leads. Survives member failure and
 * reconnects (reads are retried; watches resume from the last revision). Rejects with
 * `signal.reason` when `signal` aborts.
 */
export async function* observeLeader(client: Etcd3, prefix: Buffer, signal: AbortSignal, logger: Logger): AsyncGenerator<EtcdLeaderInfo | undefined, void, undefined> {
  let first = true;
  let last: EtcdLeaderInfo | undefined;
  const onRetry = (e: unknown): void => logger.debug({ err: e }, 'election observe: read failed; retrying');
  for (;;) {
    const read = await retryUntil(() => readLeader(client, prefix), { signal, retryable: retryableEtcdError, onRetry, initialMs: 50, maxMs: 1000 }).catch((e: unknown) => {
      throw isAbortReason(e, signal) ? e : toTenureError(e, 'election observe', undefined);
    });
    const { leader, head, revision } = read;
    // A change is a new term (key or create_revision), a new value, or nobody leading. A put that
    // repeats the value (a proclaim retried after its reply was lost when a member died) is not
    // reported again.
    if (first || changed(last, leader)) {
      first = false;
      last = leader;
      yield leader;
    }
    // With a head: its puts (claim, proclaims) and deletion matter. Without: any new key.
    if (head) await nextChange(client, head.key, revision + 1n, false, signal);
    else await nextChange(client, prefix, revision + 1n, true, signal);
  }
}
