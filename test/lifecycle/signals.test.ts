import { spawn } from 'node:child_process';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { RedisServer } from '../../src/testing/index.js';

let redis: RedisServer;
beforeAll(async () => {
  redis = await new RedisServer().start();
});
afterAll(async () => {
  await redis?.stop();
});

it('shutdownOnSignals: a second SIGTERM exits at once (code 1) while the first is still draining stuck work', async () => {
  const child = spawn(process.execPath, ['--import', 'tsx', new URL('./fixtures/stubborn.ts', import.meta.url).pathname], {
    env: { ...process.env, REDIS_PORT: String(redis.port), NAME: `stubborn-${process.pid}` },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  try {
    await new Promise<void>((r) => child.stdout.on('data', (d: Buffer) => d.toString().includes('elected') && r()));
    const exit = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
    child.kill('SIGTERM');
    const still = await Promise.race([exit, new Promise<'running'>((r) => setTimeout(() => r('running'), 1000))]);
    expect(still).toBe('running'); // draining: the work ignores its signal, drainTimeoutMs is 60 s
    child.kill('SIGTERM');
    const code = await Promise.race([exit, new Promise<'hung'>((r) => setTimeout(() => r('hung'), 10_000))]);
    expect(code).toBe(1);
  } finally {
    child.kill('SIGKILL');
  }
});
