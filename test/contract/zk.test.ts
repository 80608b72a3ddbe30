import { afterAll, afterEach, beforeAll } from 'vitest';
import type zookeeper from 'node-zookeeper-client';
import { ZooKeeperServer } from '../../src/testing/index.js';
import { LeaderLatch, ZkSession } from '../../src/recipes/zk/index.js';
import type { Candidate } from '../../src/index.js';
import { children, expireSession, rawClient } from '../zk/helpers.js';
import { candidateContract, type CandidateBackend } from './candidate.js';
import { managerContract } from './manager.js';

let zk: ZooKeeperServer;
let raw: zookeeper.Client;
const sessions = new Map<Candidate, ZkSession>();

beforeAll(async () => {
  zk = await new ZooKeeperServer().start();
  raw = await rawClient(zk.connectionString);
});
afterEach(async () => {
  await Promise.all([...sessions.values()].map((s) => s.close()));
  sessions.clear();
});
afterAll(async () => {
  raw?.close();
  await zk?.stop();
});

const backend = (): CandidateBackend => ({
  ttlMs: 3000,
  async make(name, id, clock) {
    const session = await ZkSession.create({ connectionString: zk.connectionString, ttlMs: 3000, ...(clock ? { clock } : {}) });
    const latch = new LeaderLatch(session, `/contract/${name}`, { id });
    sessions.set(latch, session);
    return latch;
  },
  async loseFromOutside(candidate) {
    await expireSession(zk.connectionString, sessions.get(candidate)!);
  },
  async participants(name) {
    return (await children(raw, `/contract/${name}`)).length;
  },
  async cleanup() {},
  port: () => zk.port,
  async makeThrough(name, id, port) {
    const session = await ZkSession.create({ connectionString: `127.0.0.1:${port}`, ttlMs: 3000 });
    const latch = new LeaderLatch(session, `/contract/${name}`, { id });
    sessions.set(latch, session);
    return latch;
  },
});

candidateContract('ZooKeeper LeaderLatch', backend, { queuesOnSession: true });
managerContract('ZooKeeper LeaderLatch', backend);
