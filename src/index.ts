/**
 * tenure: leader election and distributed locks that stay correct when a lease expires mid-work.
 * Core contracts; the backends live in `tenure/zk`, `tenure/etcd`, `tenure/redis`,
 * `tenure/postgres`, and the real-server test kit in `tenure/testing`.
 */
export * from './core/errors.js';
export { monotonicClock, monotonicNs, type Clock } from './core/clock.js';
export { LeaseController, type Lease, type LeaseInit } from './core/lease.js';
export type { Candidate } from './core/candidate.js';
export { LeaseCandidate } from './core/lease-candidate.js';
export { sleep, raceSignal, whenAborted, waitScope, type WaitScope } from './core/abort.js';
export * from './core/validate.js';
export { requireFence, type FencedResource } from './core/fencing.js';
export { InMemoryFencedResource, type FenceDecision } from './core/memory-resource.js';
