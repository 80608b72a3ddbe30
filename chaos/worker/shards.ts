import { ShardManager, type TermContext } from '../../src/index.js';
import { sleep } from '../../src/core/abort.js';
import { onParentMessage, workerReport } from '../../src/testing/index.js';
import type { Workload } from './workload.js';

/**
 * The `shards` kind: a ShardManager over the backend's membership and one election per shard
 * (`<name>/<shard>`), every process a member (drain 2 × TTL, backoff 100 ms–1 s). Each shard term
 * writes, from work tracked with the term, to its shard's own registers: the work (deaf to the
 * signal), the fenced write with the term's fence, a pause of `writeGapMs`, again, until the
 * term's signal aborts. The recorder follows every shard (`followShards`), so the checker holds
 * each shard to the rules on its own. `{ cmd: 'leave' }` from the nemesis: the member leaves
 * (every shard drained and released, the new owners take over), reports `left`, and joins again on
 * `{ cmd: 'join' }`.
 */
export async function runShards(w: Workload): Promise<void> {
  const { rec, rng, stop, cfg } = w;
  const count = cfg.shards ?? 0;
  const writes = async (shard: number, ctx: TermContext): Promise<void> => {
    while (!ctx.signal.aborted) {
      await w.write(ctx.fence, shard);
      await sleep(rng.int(cfg.writeGapMs[0], cfg.writeGapMs[1]), ctx.signal).catch(() => undefined);
    }
  };
  /** One membership's life: from joining to leaving (a `leave` fault or the end of the run). */
  const member = async (until: AbortSignal): Promise<void> => {
    const store = await w.candidate.shards(stop);
    const sm = new ShardManager(store.membership, store.candidate, { shards: count, drainTimeoutMs: 2 * cfg.ttlMs, backoff: { initialMs: 100, maxMs: 1000 } });
    sm.on('error', () => undefined); // campaign failures and the like: the history has them
    const unfollow = rec.followShards(sm);
    sm.onShardAcquired((shard, ctx) => void ctx.track(() => writes(shard, ctx)).catch(() => undefined));
    sm.start();
    await new Promise((r) => (until.aborted ? r(undefined) : until.addEventListener('abort', r, { once: true })));
    // Leaving: every held shard is handed over (recorded as a release of its term).
    const held = sm.held().map((s) => ({ s, term: sm.term(s)! }));
    for (const { s, term } of held) rec.forShard(s).record({ type: 'invoke', f: 'release', fence: term.fence });
    await sm.close().catch(() => undefined);
    for (const { s, term } of held) rec.forShard(s).record({ type: 'ok', f: 'release', fence: term.fence });
    unfollow();
  };
  let leaving: AbortController | undefined;
  let rejoin: (() => void) | undefined;
  onParentMessage((m) => {
    const cmd = (m as { cmd?: string }).cmd;
    if (cmd === 'leave') leaving?.abort();
    else if (cmd === 'join') rejoin?.();
  });
  while (!stop.aborted) {
    leaving = new AbortController();
    const until = AbortSignal.any([stop, leaving.signal]);
    try {
      await member(until);
    } catch {
      if (!stop.aborted) await sleep(100 + rng.int(0, 100)); // the store is not reachable yet
      continue;
    }
    if (stop.aborted) break;
    workerReport('left');
    await new Promise<void>((r) => {
      rejoin = r;
      stop.addEventListener('abort', () => r(), { once: true });
    });
  }
}
