import type { Cluster, Redis } from 'ioredis';
import { ConfigError } from '../../core/errors.js';

/** A standalone client or a cluster client: tenure's Redis recipes take either. */
export type RedisClient = Redis | Cluster;

/** Throws a ConfigError unless `value` looks like an ioredis client (`Redis` or `Cluster`). */
export function requireRedis(value: unknown): RedisClient {
  if (!value || typeof (value as { evalsha?: unknown }).evalsha !== 'function' || typeof (value as { duplicate?: unknown }).duplicate !== 'function') {
    throw new ConfigError('redis', 'must be an ioredis client (new Redis(...) or new Cluster(...))');
  }
  return value as RedisClient;
}
