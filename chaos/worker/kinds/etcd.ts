import { createEtcdClient, EtcdElection, EtcdSession } from '../../../src/recipes/etcd/index.js';
import type { CandidateKind } from '../kind.js';

/**
 * etcd: one session (lease) per term attempt, renewed when it was lost; the election object is
 * the session's. The client is shared and lives as long as the candidate.
 */
export const etcdCandidate: CandidateKind = (ctx) => {
  if (ctx.store.backend !== 'etcd') throw new Error('etcd candidate needs etcd endpoints');
  const client = createEtcdClient({ hosts: ctx.store.hosts });
  let session: EtcdSession | undefined;
  let election: EtcdElection | undefined;
  return {
    async campaign(signal) {
      if (!session || session.signal.aborted) {
        await election?.close().catch(() => undefined);
        session = await EtcdSession.create({ client, ttlSeconds: ctx.ttlMs / 1000, safetyMarginMs: ctx.marginMs });
        election = new EtcdElection(session, ctx.name, { value: ctx.id });
      }
      return election!.campaign({ signal });
    },
    resign: (term) => term.release(),
    async close() {
      await election?.close().catch(() => undefined);
      await session?.close().catch(() => undefined);
      client.close();
    },
  };
};
