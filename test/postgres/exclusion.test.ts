import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { PostgresServer, spawnWorker, type WorkerHandle } from '../../src/testing/index.js';
import { advisoryLocks, fixture, makePool } from './helpers.js';

let server: PostgresServer;
let pool: pg.Pool;
const workers: WorkerHandle[] = [];

beforeAll(async () => {
  server = await new PostgresServer().start();
  pool = makePool({ ...server.connectionConfig, max: 2 });
});

afterAll(async () => {
  await Promise.all(workers.map((w) => w.kill()));
  await pool?.end();
  await server?.stop();
});

it('ten contender processes, half on xact locks and half on session locks, never find the sentinel taken', async () => {
  const sentinel = join(tmpdir(), `tenure-pg-sentinel-${process.pid}`);
  const rounds = 15;
  for (let i = 0; i < 10; i++) {
    workers.push(
      await spawnWorker(fixture('contender.ts'), [], {
        env: { PG_PORT: String(server.port), MODE: i % 2 ? 'session' : 'xact', LOCK_NAME: 'mutex', SENTINEL: sentinel, ROUNDS: String(rounds) },
      }),
    );
  }
  const done = await Promise.all(workers.map((w) => w.waitFor<{ fences: string[] }>('done', { timeoutMs: 150_000 })));
  expect(workers.flatMap((w) => w.events.filter((e) => e.type === 'violation'))).toEqual([]);
  const fences = done.flatMap((d) => d.data.fences.map(BigInt));
  expect(fences).toHaveLength(10 * rounds);
  expect(new Set(fences).size).toBe(fences.length);
  expect(existsSync(sentinel)).toBe(false);
  expect(await advisoryLocks(pool)).toEqual([]);
}, 180_000);
