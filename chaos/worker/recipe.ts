import type { Candidate, Lease } from '../../src/index.js';
import { sleep } from '../../src/core/abort.js';
import type { Workload } from './workload.js';

/**
 * The `recipe` kind: the candidate driven directly. Campaign → writes (the lease checked before
 * each) → resign at a decision, or hold on; after a loss, campaign again.
 */
export async function runRecipe(w: Workload): Promise<void> {
  const { rec, rng, stop } = w;
  const hold = async (candidate: Candidate, term: Lease): Promise<void> => {
    for (let n = 1; !stop.aborted; n++) {
      if (term.lost) return;
      await w.write(term.fence);
      if (w.decide(n)) break;
    }
    if (!term.signal.aborted) await rec.release(term, () => candidate.resign()).catch(() => undefined);
  };
  while (!stop.aborted) {
    let candidate: Candidate | undefined;
    let term: Lease;
    try {
      term = await rec.acquire(async () => (candidate = await w.candidate.open(stop)).campaign({ signal: stop }));
    } catch {
      if (!stop.aborted) await sleep(100 + rng.int(0, 100));
      continue;
    }
    await hold(candidate!, term);
  }
}
