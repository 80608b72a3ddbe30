import { Redis } from 'ioredis';
import { afterAll, beforeAll } from 'vitest';
import { LeadershipManager } from '../../src/index.js';
import { RedisElection } from '../../src/recipes/redis/index.js';
import { RedisServer } from '../../src/testing/index.js';

/**
 * LeadershipManagers on one real Redis, for in-process tests of what sits on the manager
 * (timers, @Leader(), metrics): starts the server for the calling file and cleans up after it.
 * Managers get a 1 s TTL, quick backoff and no leader observation.
 */
export function redisManagers(): { manager: (name: string, id?: string) => LeadershipManager; client: () => Redis; port: () => number } {
  let server: RedisServer;
  const clients: Redis[] = [];
  beforeAll(async () => {
    server = await new RedisServer().start();
  });
  afterAll(async () => {
    for (const c of clients) c.disconnect();
    await server?.stop();
  });
  const client = (): Redis => {
    const c = new Redis({ port: server.port });
    clients.push(c);
    return c;
  };
  const manager = (name: string, id = 'm'): LeadershipManager =>
    new LeadershipManager(new RedisElection(client(), name, { id, ttlMs: 1000, restartGuardMs: 0, retryMaxMs: 100 }), { observeLeader: false, backoff: { initialMs: 20, maxMs: 100 } });
  return { manager, client, port: () => server.port };
}
