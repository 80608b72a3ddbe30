import { createEtcdClient, EtcdElection, EtcdSession } from '../../../src/recipes/etcd/index.js';
import type { CandidateKind } from '../kind.js';

/**
 * etcd: one client, one session and one election for the candidate's life; after a loss the same
 * election campaigns again on a fresh lease.
 */
export const etcdCandidate: CandidateKind = (ctx) => {
  if (ctx.store.backend !== 'etcd') throw new Error('etcd candidate needs etcd endpoints');
  const client = createEtcdClient({ hosts: ctx.store.hosts });
  let election: EtcdElection | undefined;
  return {
    async open() {
      if (!election) {
        const session = await EtcdSession.create({ client, ttlMs: ctx.ttlMs, safetyMarginMs: ctx.marginMs });
        election = new EtcdElection(session, ctx.name, { id: ctx.id });
      }
      return election;
    },
    async close() {
      await election?.close().catch(() => undefined);
      await election?.session.close().catch(() => undefined);
      client.close();
    },
  };
};
