import type { CandidateKind } from '../kind.js';
import { etcdCandidate } from './etcd.js';
import { postgresCandidate } from './postgres.js';
import { redisCandidate } from './redis.js';
import { zkCandidate } from './zk.js';

/** The candidate kinds, by backend. */
export const kinds: Record<'etcd' | 'zk' | 'redis' | 'postgres', CandidateKind> = {
  etcd: etcdCandidate,
  zk: zkCandidate,
  redis: redisCandidate,
  postgres: postgresCandidate,
};
