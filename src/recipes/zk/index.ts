/**
 * tenure/zk: ZooKeeper recipes in the manner of Apache Curator, on node-zookeeper-client. One
 * {@link ZkSession} owns liveness; every recipe's leases derive from its signal.
 */
export { ZkSession, type ZkSessionOptions, type ZkSessionEvents, type ZkConnectionState, type ZkErrorPolicy } from './session.js';
export { InterProcessMutex, ReentrantZkLock, type AcquireOptions } from './mutex.js';
export { LeaderLatch, type LeaderLatchOptions, type LeaderLatchEvents, type Participant, type CloseMode } from './latch.js';
export { validatePath } from './paths.js';
export { digestAcl, type ZkAcl, type ZkAuthInfo } from './acl.js';
export type { LockDriver, DriverVerdict } from './drivers.js';
export { InterProcessSemaphoreV2 } from './semaphore.js';
export { InterProcessReadWriteLock } from './rwlock.js';
export { LeaderSelector, type LeaderSelectorOptions, type LeaderSelectorEvents, type LeadershipContext } from './selector.js';
