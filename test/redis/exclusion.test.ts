import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { RedisServer, spawnWorker, type WorkerHandle } from '../../src/testing/index.js';
import { fixture } from './helpers.js';

let server: RedisServer;
const workers: WorkerHandle[] = [];

beforeAll(async () => {
  server = await new RedisServer().start();
});

afterAll(async () => {
  await Promise.all(workers.map((w) => w.kill()));
  await server?.stop();
});

it('ten contender processes never find the sentinel taken, and every acquisition has its own fence', async () => {
  const sentinel = join(tmpdir(), `tenure-redis-sentinel-${process.pid}`);
  const rounds = 15;
  for (let i = 0; i < 10; i++) {
    workers.push(
      await spawnWorker(fixture('contender.ts'), [], {
        env: { REDIS_PORT: String(server.port), LOCK_NAME: 'mutex', PREFIX: 'x:', SENTINEL: sentinel, ROUNDS: String(rounds) },
      }),
    );
  }
  const done = await Promise.all(workers.map((w) => w.waitFor<{ fences: string[] }>('done', { timeoutMs: 150_000 })));
  const violations = workers.flatMap((w) => w.events.filter((e) => e.type === 'violation'));
  expect(violations).toEqual([]);
  const fences = done.flatMap((d) => d.data.fences.map(BigInt));
  expect(fences).toHaveLength(10 * rounds);
  expect(new Set(fences).size).toBe(fences.length);
  for (const d of done) {
    const own = d.data.fences.map(BigInt);
    expect([...own].sort((x, y) => (x < y ? -1 : 1))).toEqual(own); // each process sees its fences rise
  }
  expect(existsSync(sentinel)).toBe(false);
}, 180_000);
