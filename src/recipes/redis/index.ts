/**
 * tenure/redis: a fenced, renewing lock on a single Redis node, an election built on it, and a
 * fenced resource kept in Redis. Needs the optional peer dependency `ioredis`.
 */
export { RedisLock, type RedisLockOptions, type AcquireOptions } from './lock.js';
export { RedisElection, type RedisElectionOptions } from './election.js';
export { RenewWatchdog } from './watchdog.js';
export { RedisFencedResource, RedisFencedWrite } from './fenced-resource.js';
