import { LeaderLatch, ZkSession } from '../../../src/recipes/zk/index.js';
import type { CandidateKind } from '../kind.js';

/**
 * ZooKeeper: one session for the candidate's life (it makes a new ZooKeeper session by itself
 * after LOST) and one LeaderLatch, which re-joins the queue by itself after every term.
 */
export const zkCandidate: CandidateKind = (ctx) => {
  if (ctx.store.backend !== 'zk') throw new Error('zk candidate needs a connection string');
  const cs = ctx.store.connectionString;
  let session: ZkSession | undefined;
  let latch: LeaderLatch | undefined;
  return {
    async campaign(signal) {
      if (!session) {
        const s = new ZkSession(cs, { sessionTimeoutMs: ctx.ttlMs, safetyMarginMs: ctx.marginMs });
        try {
          await s.start({ signal });
        } catch (e) {
          await s.close();
          throw e;
        }
        session = s;
        latch = new LeaderLatch(session, ctx.name, { id: ctx.id });
      }
      return latch!.campaign({ signal });
    },
    // Ending the term is enough: the latch queues again with a new node.
    resign: (term) => term.release(),
    async close() {
      await latch?.close().catch(() => undefined);
      await session?.close().catch(() => undefined);
    },
  };
};
