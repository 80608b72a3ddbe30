import { createEtcdClient, EtcdElection, EtcdMembership, EtcdSession } from '../../../src/recipes/etcd/index.js';
import type { Etcd3 } from 'etcd3';
import type { CandidateKind } from '../kind.js';

/**
 * etcd: one client, one session and one election for the candidate's life; after a loss the same
 * election campaigns again on a fresh lease. The shard kind's membership and elections share it.
 */
export const etcdCandidate: CandidateKind = (ctx) => {
  const store = ctx.store;
  if (store.backend !== 'etcd') throw new Error('etcd candidate needs etcd endpoints');
  let client: Etcd3 | undefined;
  let election: EtcdElection | undefined;
  let session: EtcdSession | undefined;
  const live = async (): Promise<EtcdSession> => {
    client ??= await createEtcdClient({ hosts: store.hosts });
    return (session ??= await EtcdSession.create({ client, ttlMs: ctx.ttlMs, safetyMarginMs: ctx.marginMs }));
  };
  return {
    async open() {
      election ??= new EtcdElection(await live(), ctx.name, { id: ctx.id });
      return election;
    },
    async shards() {
      const s = await live();
      return { membership: new EtcdMembership(s, `${ctx.name}/members`, { id: ctx.id }), candidate: (shard) => new EtcdElection(s, `${ctx.name}/${shard}`, { id: ctx.id }) };
    },
    async close() {
      await election?.close().catch(() => undefined);
      await session?.close().catch(() => undefined);
      client?.close();
    },
  };
};
