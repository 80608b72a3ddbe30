/**
 * tenure/etcd: leases, leader election and a fair mutex on etcd v3, built on the `etcd3` client
 * (an optional peer dependency). One {@link EtcdSession} owns liveness (lease + keepalive + local
 * deadline); {@link EtcdElection} and {@link EtcdMutex} queue by create_revision, watch only their
 * predecessor, and hand out Leases whose fence is the revision of the winning put.
 */
export { EtcdSession, type EtcdSessionOptions } from './session.js';
export { EtcdElection, type Term, type EtcdCampaignOptions, type EtcdElectionOptions } from './election.js';
export { EtcdMutex, type EtcdMutexAcquireOptions } from './mutex.js';
export { observeLeader, readLeader, type LeaderInfo } from './observe.js';
export { createEtcdClient, callWithin, type EtcdClientOptions, type CallOptions } from './client.js';
export type { QueueStats } from './queue.js';
