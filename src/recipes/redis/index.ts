/**
 * tenure/redis: a fenced, renewing lock on a single Redis node, an election built on it, and a
 * fenced resource kept in Redis. Needs the optional peer dependency `ioredis`.
 */
export { RedisLock, type RedisLockOptions } from './lock.js';
export { RedisElection, type RedisElectionOptions } from './election.js';
export { RedisMembership, type RedisMembershipOptions } from './membership.js';
export { RedisFencedResource, type RedisFencedWrite, type RedisFencedResourceOptions } from './fenced-resource.js';
