/**
 * tenure/etcd: leases, leader election and a fair mutex on etcd v3, built on the `etcd3` client
 * (an optional peer dependency). One {@link EtcdSession} owns liveness (lease + keepalive + local
 * deadline); {@link EtcdElection} and {@link EtcdMutex} queue by create_revision, watch only their
 * predecessor, and hand out Leases whose fence is the revision of the winning put.
 */
export { EtcdSession, type EtcdSessionOptions } from './session.js';
export { EtcdElection, type Term, type EtcdElectionOptions } from './election.js';
export { EtcdMutex } from './mutex.js';
export { EtcdMembership, type EtcdMembershipOptions } from './membership.js';
export type { EtcdLeaderInfo } from './observe.js';
export { createEtcdClient, type EtcdClientOptions } from './client.js';
export type { QueueStats } from './queue.js';
