/**
 * tenure/zk: ZooKeeper recipes in the manner of Apache Curator (same node layouts), on
 * node-zookeeper-client (an optional peer dependency). One {@link ZkSession} owns liveness;
 * every recipe's leases derive from its signal.
 */
export { ZkSession, type ZkSessionOptions, type ZkSessionEvents, type ZkConnectionState, type ZkErrorPolicy } from './session.js';
export { InterProcessMutex, type InterProcessLock, type InterProcessMutexOptions } from './mutex.js';
export { LeaderLatch, type LeaderLatchOptions, type CloseMode } from './latch.js';
export type { Participant } from './leader.js';
export { InterProcessSemaphoreV2 } from './semaphore.js';
export { InterProcessReadWriteLock } from './rwlock.js';
export { ZkMembership, type ZkMembershipOptions } from './membership.js';
export { digestAcl, type ZkAcl, type ZkAuthInfo } from './acl.js';
