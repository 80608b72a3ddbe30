import { describe, expect, it } from 'vitest';
import { existsSync } from 'node:fs';
import { reapOrphans, spawnWorker } from '../../src/testing/index.js';
import { isAlive } from '../helpers/clients.js';
import { eventually } from '../helpers/wait.js';

const ownsRedis = new URL('./fixtures/owns-redis.ts', import.meta.url).pathname;


describe('cleanup of what the kit starts', () => {
  it('a process that exits normally takes its servers and temp dirs with it', async () => {
    const w = await spawnWorker(ownsRedis);
    const { data } = await w.waitFor<{ pid: number; dir: string }>('started');
    expect(isAlive(data.pid)).toBe(true);
    await w.stop(); // SIGTERM: the kit's handler ends the server, removes the dir, then exits
    await eventually(async () => {
      if (isAlive(data.pid)) throw new Error('server still running');
    }, 5000);
    expect(existsSync(data.dir)).toBe(false);
  });

  it('servers and dirs of a SIGKILLed owner are reaped by reapOrphans()', async () => {
    const w = await spawnWorker(ownsRedis);
    const { data } = await w.waitFor<{ pid: number; dir: string }>('started');
    await w.kill(); // no handler runs: the server is orphaned
    expect(isAlive(data.pid)).toBe(true);
    const report = reapOrphans();
    expect(report.killed.map((k) => k.pid)).toContain(data.pid);
    expect(report.removedDirs).toContain(data.dir);
    await eventually(async () => {
      if (isAlive(data.pid)) throw new Error('orphan still running');
    }, 5000);
    expect(existsSync(data.dir)).toBe(false);
  });
});
