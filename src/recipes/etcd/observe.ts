import { SortOrder, SortTarget, type IKeyValue } from 'etcd3';
import { sleep } from '../../core/abort.js';
import { TenureError } from '../../core/errors.js';
import { callWithin, mapEtcdError } from './client.js';
import { prefixEnd } from './kv.js';
import { refuseNested } from './names.js';
import type { EtcdSession } from './session.js';
import type { Etcd3 } from 'etcd3';

/** Who leads an election, as an observer sees it. */
export interface LeaderInfo {
  /** The leader's key, `<name>/<lease id hex>`. */
  key: string;
  /** The value it campaigned or last proclaimed with. */
  value: Buffer;
  /** Its place in the queue. */
  createRevision: bigint;
  /** Revision of its last put (the claim or the latest proclaim). */
  modRevision: bigint;
  /**
   * The term's fence: the revision of the put that claimed leadership (the key's 2nd version).
   * Undefined while the head has not claimed yet, or when that history was compacted away.
   */
  fence: bigint | undefined;
}

/** Finds the revision of the key's 2nd version (its claim) by bisecting its history. */
async function claimRevision(client: Etcd3, kv: IKeyValue): Promise<bigint | undefined> {
  if (kv.version === '1') return undefined;
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

/** The head of the queue under `prefix` at one revision. */
export async function readLeader(client: Etcd3, prefix: Buffer): Promise<{ leader: LeaderInfo | undefined; revision: bigint }> {
  const res = await client.kv
    .range({ key: prefix, range_end: prefixEnd(prefix), sort_order: SortOrder.Ascend, sort_target: SortTarget.Create, limit: 1 }, callWithin(5000))
    .catch((e: unknown) => Promise.reject(mapEtcdError(e)));
  const kv = res.kvs[0];
  const revision = BigInt(res.header.revision);
  if (!kv) return { leader: undefined, revision };
  refuseNested(prefix, kv.key);
  return {
    revision,
    leader: {
      key: kv.key.toString(),
      value: kv.value,
      createRevision: BigInt(kv.create_revision),
      modRevision: BigInt(kv.mod_revision),
      fence: await claimRevision(client, kv),
    },
  };
}

/** Waits for the first event on a key (or under a prefix) from `fromRev`. */
async function nextChange(client: Etcd3, key: Buffer, fromRev: bigint, prefix: boolean, signal: AbortSignal): Promise<void> {
  const b = client.watch().startRevision(String(fromRev));
  const w = (prefix ? b.prefix(key) : b.key(key)).watcher();
  let onAbort: (() => void) | undefined;
  try {
    await new Promise<void>((resolve, reject) => {
      onAbort = () => reject(signal.reason);
      signal.addEventListener('abort', onAbort, { once: true });
      w.on('data', () => resolve());
      w.on('error', () => resolve()); // re-read; the loop retries
    });
  } finally {
    if (onAbort) signal.removeEventListener('abort', onAbort);
    void w.cancel().catch(() => undefined);
  }
}

/**
 * Leader changes under `prefix` as an async iterator: yields the current leader once it has
 * claimed, then every new leader and every newly proclaimed value (a proclaim of the value the
 * leader already has is not a change). Survives member failure and
 * reconnects (reads are retried; watches resume from the last revision). Rejects with
 * `signal.reason` when `signal` aborts.
 */
export async function* observeLeader(client: Etcd3, prefix: Buffer, signal: AbortSignal, logger?: EtcdSession['logger']): AsyncGenerator<LeaderInfo, void, undefined> {
  let last: LeaderInfo | undefined;
  let failures = 0;
  for (;;) {
    signal.throwIfAborted();
    let read: Awaited<ReturnType<typeof readLeader>>;
    try {
      read = await readLeader(client, prefix);
      failures = 0;
    } catch (e) {
      if (e instanceof TenureError) throw e;
      logger?.debug({ err: e }, 'election observe: read failed; retrying');
      await sleep(Math.min(1000, 50 * 2 ** Math.min(failures++, 5)), signal);
      continue;
    }
    const { leader, revision } = read;
    const claimed = leader && leader.fence !== undefined ? leader : undefined;
    // A change is a new term (key or create_revision) or a new value. A put that repeats the value
    // (a proclaim retried after its reply was lost when a member died) is not reported again.
    if (claimed && (!last || last.key !== claimed.key || last.createRevision !== claimed.createRevision || !last.value.equals(claimed.value))) {
      last = claimed;
      yield claimed;
    }
    // With a head: its puts (claim, proclaims) and deletion matter. Without: any new key.
    if (leader) await nextChange(client, Buffer.from(leader.key), revision + 1n, false, signal);
    else await nextChange(client, prefix, revision + 1n, true, signal);
  }
}
