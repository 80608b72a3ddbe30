import { spawn } from 'node:child_process';
import { describe, expect, it } from 'vitest';

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe('npm run demo', () => {
  it('narrates an election, a crash failover, a rejected stale write and a handoff, then exits 0 leaving nothing behind', async () => {
    const demo = new URL('../../examples/demo/demo.ts', import.meta.url).pathname;
    const child = spawn(process.execPath, ['--import', 'tsx', demo], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    const t0 = performance.now();
    const code = await new Promise<number | null>((resolve) => child.on('exit', (c) => resolve(c)));
    const elapsed = performance.now() - t0;
    expect(code, out).toBe(0);
    expect(elapsed).toBeLessThan(60_000);
    const line = out.split('\n').find((l) => l.startsWith('SUMMARY '));
    expect(line, out).toBeDefined();
    const s = JSON.parse(line!.slice('SUMMARY '.length)) as {
      ttlSeconds: number;
      terms: { name: string; fence: string }[];
      fencesIncreasing: boolean;
      failoverMs: number;
      pausedDeadlineBeforeNextElectedMs: number;
      handoffMs: number;
      writesAccepted: number;
      writesRejected: number;
      rejected: { name: string; fence: string; highest: string }[];
      pids: number[];
      etcdPid: number;
    };
    expect(s.terms.length).toBeGreaterThanOrEqual(4);
    expect(s.fencesIncreasing).toBe(true);
    // Failover after SIGKILL: not before the lease could run out, not much after the TTL.
    expect(s.failoverMs).toBeGreaterThan((s.ttlSeconds * 1000 * 2) / 3 - 250);
    expect(s.failoverMs).toBeLessThan(s.ttlSeconds * 1000 + 3000);
    // The paused leader's deadline passed before the next leader was elected; its late write was refused.
    expect(s.pausedDeadlineBeforeNextElectedMs).toBeGreaterThan(0);
    expect(s.writesRejected).toBe(1);
    expect(s.rejected[0]!.name).toBe(s.terms[1]!.name);
    expect(BigInt(s.rejected[0]!.fence)).toBeLessThan(BigInt(s.rejected[0]!.highest));
    expect(s.writesAccepted).toBeGreaterThan(5);
    expect(out).toMatch(/REJECTED/);
    expect(out).toMatch(/SIGKILL/);
    expect(out).toMatch(/SIGSTOP/);
    expect(out).toMatch(/resigns/);
    for (const pid of [...s.pids, s.etcdPid]) expect(alive(pid), `pid ${pid} left running`).toBe(false);
  });
});
