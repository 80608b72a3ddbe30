import type { CandidateKind } from '../kind.js';

/**
 * The candidate of each backend, each loaded only when used: a candidate process then loads one
 * backend's client, not four (etcd3 and gRPC alone take a few hundred ms to load).
 */
export const backends: Record<'etcd' | 'zk' | 'redis' | 'postgres', () => Promise<CandidateKind>> = {
  etcd: async () => (await import('./etcd.js')).etcdCandidate,
  zk: async () => (await import('./zk.js')).zkCandidate,
  redis: async () => (await import('./redis.js')).redisCandidate,
  postgres: async () => (await import('./postgres.js')).postgresCandidate,
};
