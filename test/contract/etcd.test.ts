import { afterAll, afterEach, beforeAll } from 'vitest';
import { EtcdServer } from '../../src/testing/index.js';
import { EtcdElection, EtcdSession, createEtcdClient } from '../../src/recipes/etcd/index.js';
import type { Etcd3 } from 'etcd3';
import type { Candidate } from '../../src/index.js';
import { candidateContract, type CandidateBackend } from './candidate.js';
import { managerContract } from './manager.js';

let etcd: EtcdServer;
let client: Etcd3;
const sessions = new Map<Candidate, EtcdSession>();
const clients: Etcd3[] = [];

beforeAll(async () => {
  etcd = await new EtcdServer().start();
  client = await createEtcdClient({ hosts: etcd.endpoints });
});
afterEach(async () => {
  await Promise.all([...sessions.values()].map((s) => s.close()));
  sessions.clear();
  for (const c of clients.splice(0)) c.close();
});
afterAll(async () => {
  client?.close();
  await etcd?.stop();
});

const backend = (): CandidateBackend => ({
  ttlMs: 2000,
  async make(name, id, clock) {
    const session = await EtcdSession.create({ client, ttlMs: 2000, ...(clock ? { clock } : {}) });
    const e = new EtcdElection(session, `contract/${name}`, { id });
    sessions.set(e, session);
    return e;
  },
  async loseFromOutside(candidate) {
    await client.leaseClient.leaseRevoke({ ID: sessions.get(candidate)!.leaseId });
  },
  async participants(name) {
    return (await client.getAll().prefix(`contract/${name}/`).keys()).length;
  },
  async cleanup() {},
  port: () => etcd.clientPort,
  async makeThrough(name, id, port) {
    const c = await createEtcdClient({ hosts: [`http://127.0.0.1:${port}`] });
    clients.push(c);
    const session = await EtcdSession.create({ client: c, ttlMs: 2000 });
    const e = new EtcdElection(session, `contract/${name}`, { id });
    sessions.set(e, session);
    return e;
  },
});

candidateContract('etcd EtcdElection', backend, { queuesOnSession: true });
managerContract('etcd EtcdElection', backend);
