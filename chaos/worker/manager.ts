import { LeadershipManager, type Candidate, type TermContext } from '../../src/index.js';
import { sleep } from '../../src/core/abort.js';
import type { Workload } from './workload.js';

/** How long a resigning manager stays out of the race, so that another candidate leads next. */
const COOLDOWN_MS = 250;

/**
 * The `manager` kind: a LeadershipManager over the candidate. Each term's writes check the term's
 * `signal` (as a user's code does) and carry its `fence`; half the terms write from `onElected`
 * itself, the other half from work registered with `ctx.track` while the hook returns at once
 * (daemon style). At a decision the term resigns. The recorder follows the manager, so a term
 * ends in the history where the manager's signal aborted (or earlier, at its local deadline).
 */
export async function runManager(w: Workload): Promise<void> {
  const { rec, rng, stop, cfg } = w;
  let candidate: Candidate | undefined;
  while (!candidate && !stop.aborted) {
    candidate = await w.candidate.open(stop).catch(() => undefined);
    if (!candidate && !stop.aborted) await sleep(100 + rng.int(0, 100));
  }
  if (!candidate) return;
  const manager = new LeadershipManager(candidate, { drainTimeoutMs: cfg.ttlMs, backoff: { initialMs: 100, maxMs: 1000 } });
  manager.on('error', () => undefined); // campaign failures and the like: the history has them
  const unfollow = rec.followManager(manager);
  const writes = async (ctx: TermContext): Promise<void> => {
    for (let n = 1; !ctx.signal.aborted; n++) {
      await w.write(ctx.fence);
      if (w.decide(n)) {
        // Not awaited: resign() resolves once the term has drained, and the drain waits for this
        // very work; awaiting it here would stall the term until drainTimeoutMs.
        void rec.release(ctx.term, () => manager.resign({ cooldownMs: COOLDOWN_MS })).catch(() => undefined);
        return;
      }
    }
  };
  manager.onElected(async (ctx) => {
    if (rng.chance(0.5)) await writes(ctx);
    else void ctx.track(() => writes(ctx)).catch(() => undefined);
  });
  manager.start();
  await new Promise((r) => (stop.aborted ? r(undefined) : stop.addEventListener('abort', r, { once: true })));
  const term = manager.currentTerm;
  if (term) await rec.release(term.term, () => manager.close()).catch(() => undefined);
  else await manager.close().catch(() => undefined);
  unfollow();
}
