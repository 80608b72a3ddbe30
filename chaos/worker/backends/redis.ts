import { Redis } from 'ioredis';
import { RedisElection, RedisMembership } from '../../../src/recipes/redis/index.js';
import type { CandidateKind } from '../kind.js';

/** Redis: one RedisElection (a RedisLock underneath) on one client for the candidate's life. */
export const redisCandidate: CandidateKind = (ctx) => {
  if (ctx.store.backend !== 'redis') throw new Error('redis candidate needs a redis endpoint');
  const redis = new Redis({ host: ctx.store.host, port: ctx.store.port, lazyConnect: false });
  redis.on('error', () => undefined); // reconnects by itself; the lease's signal says what it means
  const election = new RedisElection(redis, ctx.name, { id: ctx.id, ttlMs: ctx.ttlMs, safetyMarginMs: ctx.marginMs });
  const timing = { ttlMs: ctx.ttlMs, safetyMarginMs: ctx.marginMs };
  return {
    open: async () => election,
    shards: async () => ({ membership: new RedisMembership(redis, `${ctx.name}/members`, { id: ctx.id, ...timing }), candidate: (shard) => new RedisElection(redis, `${ctx.name}/${shard}`, { id: ctx.id, ...timing }) }),
    async close() {
      await election.close().catch(() => undefined);
      redis.disconnect();
    },
  };
};
