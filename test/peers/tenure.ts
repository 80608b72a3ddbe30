/**
 * The few tenure calls the interop tests and the peer benchmarks make, in one place, so an API
 * change on the recipes is adapted here once.
 */
import type { Etcd3 } from 'etcd3';
import { EtcdElection, EtcdMutex, EtcdSession, createEtcdClient } from '../../src/recipes/etcd/index.js';
import { InterProcessMutex, LeaderLatch, ZkSession } from '../../src/recipes/zk/index.js';
import type { Lease } from '../../src/core/lease.js';

export interface Wait {
  signal?: AbortSignal;
  timeoutMs?: number;
}

/** A lock as the peer tests use it. */
export interface PeerLock {
  acquire(wait?: Wait): Promise<Lease>;
  close(): Promise<void>;
}

/** A candidate as the peer tests use it. */
export interface PeerCandidate {
  campaign(wait?: Wait): Promise<Lease>;
  /** The leading participant's id (ZooKeeper: its node data; etcd: its value), if any. */
  leaderId(): Promise<string | undefined>;
  close(): Promise<void>;
}

export function zkSession(connectionString: string, sessionTimeoutMs = 10_000): Promise<ZkSession> {
  return ZkSession.create({ connectionString, ttlMs: sessionTimeoutMs });
}

export function zkMutex(session: ZkSession, path: string): PeerLock {
  return new InterProcessMutex(session, path);
}

export function zkLatch(session: ZkSession, path: string, id: string): PeerCandidate & { latch: LeaderLatch } {
  const latch = new LeaderLatch(session, path, { id });
  return {
    latch,
    campaign: (wait = {}) => latch.campaign(wait),
    leaderId: async () => (await latch.leader())?.id,
    close: () => latch.close(),
  };
}

/** A session with a client of its own (close it with {@link closeEtcdSession}). */
export async function etcdSession(hosts: string[], ttlSeconds: number): Promise<EtcdSession> {
  return etcdSessionOn(await createEtcdClient({ hosts }), ttlSeconds);
}

/** A session on a shared client (many sessions in one process). */
export function etcdSessionOn(client: Etcd3, ttlSeconds: number): Promise<EtcdSession> {
  return EtcdSession.create({ client, ttlMs: ttlSeconds * 1000 });
}

/** Closes the session and the client it was made with. */
export async function closeEtcdSession(session: EtcdSession): Promise<void> {
  await session.close();
  session.client.close();
}

export function etcdMutex(session: EtcdSession, name: string): PeerLock & { key: string; wakeUps(): number } {
  const m = new EtcdMutex(session, name);
  return { key: m.key, acquire: (wait) => m.acquire(wait), close: () => m.close(), wakeUps: () => m.stats.predecessorWakeups };
}

export function etcdElection(session: EtcdSession, name: string, id: string): PeerCandidate & { key: string; wakeUps(): number; joined(): boolean } {
  const e = new EtcdElection(session, name, { id });
  return {
    key: e.key,
    campaign: (wait = {}) => e.campaign(wait),
    leaderId: async () => (await e.leader())?.id,
    close: () => e.close(),
    wakeUps: () => e.stats.predecessorWakeups,
    // In the queue, waiting on a predecessor (or already leading).
    joined: () => e.stats.predecessorWatches > 0 || e.term !== undefined,
  };
}
