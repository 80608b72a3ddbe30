import { describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { reapOrphans, spawnWorker } from '../../src/testing/index.js';
import { isAlive } from '../helpers/clients.js';
import { eventually } from '../helpers/wait.js';

const ownsRedis = new URL('./fixtures/owns-redis.ts', import.meta.url).pathname;
const leakGuardRun = new URL('./fixtures/leak-guard/vitest.config.ts', import.meta.url).pathname;
const vitest = new URL('../../node_modules/vitest/vitest.mjs', import.meta.url).pathname;


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

  it("the suite's global teardown fails the run when a test file left a server or dir behind (Vitest alone would exit 0)", () => {
    // Its own temp dir, so its kit records are its own: its reaping never touches this run's.
    const own = mkdtempSync(join(tmpdir(), 'tenure-leak-guard-'));
    try {
      const run = spawnSync(process.execPath, [vitest, 'run', '--config', leakGuardRun], { encoding: 'utf8', timeout: 60_000, env: { ...process.env, TMPDIR: own } });
      const out = `${run.stdout}${run.stderr}`;
      expect(out).toContain('test suite left resources behind (now cleaned up)');
      expect(out).toContain('1 passed');
      expect(run.status, out).toBe(1);
    } finally {
      rmSync(own, { recursive: true, force: true });
    }
  });
});
