import { afterAll, beforeAll, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import { ConfigError, StaleFenceError } from '../../src/index.js';
import { RedisFencedResource } from '../../src/recipes/redis/index.js';
import { RedisServer } from '../../src/testing/index.js';
import { client } from '../redis/helpers.js';
import { fencedResourceContract } from './contract.js';

let server: RedisServer;
let redis: Redis;
let n = 0;

beforeAll(async () => {
  server = await new RedisServer().start();
  redis = client(server.port);
});

afterAll(async () => {
  redis?.disconnect();
  await server?.stop();
});

fencedResourceContract('RedisFencedResource', async () => {
  const id = ++n;
  const resource = new RedisFencedResource(redis, `contract:${id}:fence`);
  const dataKey = `contract:${id}:data`;
  return {
    resource,
    write: (fence, v) => resource.write(fence, (w) => w.set(dataKey, v)),
    failingWrite: (fence) =>
      resource.write(fence, (w) => {
        w.set(dataKey, 'never');
        throw new Error('body failed');
      }),
    read: async () => (await redis.get(dataKey)) ?? undefined,
  };
});

it('compares fences beyond 2^53 exactly', async () => {
  const r = new RedisFencedResource(redis, 'big:fence');
  const high = 2n ** 62n + 1n;
  await r.write(high, (w) => w.set('big:data', 'high'));
  await expect(r.write(high - 1n, (w) => w.set('big:data', 'low'))).rejects.toBeInstanceOf(StaleFenceError);
  await r.write(high, (w) => w.set('big:data', 'again'));
  expect(await r.highestFence()).toBe(high);
  expect(await redis.get('big:data')).toBe('again');
});

it('applies several data commands atomically with the fence check', async () => {
  const r = new RedisFencedResource(redis, 'multi:fence');
  await r.write(3n, (w) => w.set('multi:a', 1).hset('multi:h', { x: 'y' }).rpush('multi:l', 'e1').incrby('multi:c', 5));
  await expect(r.write(2n, (w) => w.set('multi:a', 2).incrby('multi:c', 5))).rejects.toMatchObject({ highest: 3n });
  expect(await redis.get('multi:a')).toBe('1');
  expect(await redis.get('multi:c')).toBe('5');
  expect(await redis.hget('multi:h', 'x')).toBe('y');
});

it('refuses a missing client or key with ConfigError', () => {
  expect(() => new RedisFencedResource(redis, '')).toThrow(ConfigError);
  expect(() => new RedisFencedResource(undefined as unknown as Redis, 'k')).toThrow(/^redis:/);
});
