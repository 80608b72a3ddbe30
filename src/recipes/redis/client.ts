import type { Redis } from 'ioredis';
import { ConfigError } from '../../core/errors.js';

/** Throws a ConfigError unless `value` looks like an ioredis client. */
export function requireRedis(value: unknown): Redis {
  if (!value || typeof (value as { evalsha?: unknown }).evalsha !== 'function' || typeof (value as { duplicate?: unknown }).duplicate !== 'function') {
    throw new ConfigError('redis', 'must be an ioredis client (new Redis(...))');
  }
  return value as Redis;
}
