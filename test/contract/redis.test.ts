import { afterAll, afterEach, beforeAll } from 'vitest';
import type { Redis } from 'ioredis';
import { RedisServer } from '../../src/testing/index.js';
import { RedisElection } from '../../src/recipes/redis/index.js';
import { backdateBoot, client } from '../redis/helpers.js';
import { candidateContract, type CandidateBackend } from './candidate.js';
import { managerContract } from './manager.js';

const prefix = 'contract:';
let server: RedisServer;
let redis: Redis;
const extra: Redis[] = [];

beforeAll(async () => {
  server = await new RedisServer().start();
  redis = client(server.port);
  await backdateBoot(redis, prefix);
});
afterEach(() => {
  for (const c of extra.splice(0)) c.disconnect();
});
afterAll(async () => {
  redis?.disconnect();
  await server?.stop();
});

const backend = (): CandidateBackend => ({
  ttlMs: 2000,
  lossNoticeSlackMs: 50,
  async make(name, id, clock) {
    return new RedisElection(redis, name, { id, ttlMs: 2000, keyPrefix: prefix, retryMaxMs: 200, observeIntervalMs: 200, ...(clock ? { clock } : {}) });
  },
  async loseFromOutside(_candidate, term) {
    // Someone deletes the key (an operator, a FLUSHDB): the holder's next renew finds it gone.
    await redis.eval(`return redis.call('UNLINK', KEYS[1])`, 1, `${prefix}lock:{${term.name}}`);
  },
  async participants(name) {
    return (await redis.exists(`${prefix}lock:{${name}}`)) + (await redis.zcard(`${prefix}queue:{${name}}`));
  },
  async cleanup() {},
  port: () => server.port,
  async makeThrough(name, id, port) {
    const c = client(port);
    extra.push(c);
    return new RedisElection(c, name, { id, ttlMs: 2000, keyPrefix: prefix, retryMaxMs: 200, observeIntervalMs: 200 });
  },
});

candidateContract('Redis RedisElection', backend);
managerContract('Redis RedisElection', backend);
