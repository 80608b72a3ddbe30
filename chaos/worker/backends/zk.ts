import { LeaderLatch, ZkMembership, ZkSession } from '../../../src/recipes/zk/index.js';
import type { CandidateKind } from '../kind.js';

/**
 * ZooKeeper: one session for the candidate's life (it makes a new ZooKeeper session by itself
 * after LOST) and one LeaderLatch, which campaigns again after any loss.
 */
export const zkCandidate: CandidateKind = (ctx) => {
  if (ctx.store.backend !== 'zk') throw new Error('zk candidate needs a connection string');
  const cs = ctx.store.connectionString;
  let session: ZkSession | undefined;
  let latch: LeaderLatch | undefined;
  const live = async (signal: AbortSignal): Promise<ZkSession> => (session ??= await ZkSession.create({ connectionString: cs, ttlMs: ctx.ttlMs, safetyMarginMs: ctx.marginMs }, { signal }));
  return {
    async open(signal) {
      latch ??= new LeaderLatch(await live(signal), ctx.name, { id: ctx.id });
      return latch;
    },
    async shards(signal) {
      const s = await live(signal);
      return { membership: new ZkMembership(s, `${ctx.name}/members`, { id: ctx.id }), candidate: (shard) => new LeaderLatch(s, `${ctx.name}/${shard}`, { id: ctx.id }) };
    },
    async close() {
      await latch?.close().catch(() => undefined);
      await session?.close().catch(() => undefined);
    },
  };
};
