import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { isRunning } from '../cli/helpers.js';

type Term = { name: string; fence: string; start: number; end: number; ended: string };
type Summary = {
  ttlMs: number;
  sections: { backend: string; terms: Term[]; gaps: { cause: string; name: string; ms: number }[]; writesAccepted: number; rejected: { name: string; fence: string; highest: string }[] }[];
  cliExitCode: number;
  chart: string;
  pids: number[];
  serverPids: number[];
};

describe('npm run demo', () => {
  it('narrates the manager on etcd and ZooKeeper and a tenure run failover, prints the summary, writes a chart naming every term, exits 0 and leaves nothing behind', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tenure-demo-'));
    const chart = join(dir, 'timeline.svg');
    try {
      const demo = new URL('../../examples/demo/demo.ts', import.meta.url).pathname;
      const child = spawn(process.execPath, ['--import', 'tsx', demo, chart], { stdio: ['ignore', 'pipe', 'pipe'] });
      let out = '';
      child.stdout.on('data', (d: Buffer) => (out += d.toString()));
      child.stderr.on('data', (d: Buffer) => (out += d.toString()));
      const t0 = performance.now();
      const code = await new Promise<number | null>((resolve) => child.on('exit', (c) => resolve(c)));
      expect(code, out).toBe(0);
      expect(performance.now() - t0).toBeLessThan(60_000);
      const line = out.split('\n').find((l) => l.startsWith('SUMMARY '));
      expect(line, out).toBeDefined();
      const s = JSON.parse(line!.slice('SUMMARY '.length)) as Summary;
      expect(s.sections.map((x) => x.backend)).toEqual(['etcd', 'zk', 'cli']);

      for (const x of s.sections.slice(0, 2)) {
        expect(x.terms.length, x.backend).toBeGreaterThanOrEqual(4);
        const fences = x.terms.map((t) => BigInt(t.fence));
        expect(fences.every((f, i) => i === 0 || f > fences[i - 1]!), `${x.backend} fences rise`).toBe(true);
        const gap = (cause: string): number => x.gaps.find((g) => g.cause === cause)!.ms;
        // A crashed leader's lease (session) has to run out: not before 2/3 of the TTL, not much after it.
        expect(gap('SIGKILL')).toBeGreaterThan((s.ttlMs * 2) / 3 - 250);
        expect(gap('SIGKILL')).toBeLessThan(s.ttlMs + 3000);
        expect(gap('SIGSTOP')).toBeLessThan(s.ttlMs + 3000);
        expect(gap('resign')).toBeLessThan(s.ttlMs); // a hand-off does not wait for the TTL
        // The paused leader's late write was refused by the fence.
        expect(x.rejected.length).toBeGreaterThanOrEqual(1);
        expect(x.rejected[0]!.name).toBe(x.terms[1]!.name);
        expect(BigInt(x.rejected[0]!.fence)).toBeLessThan(BigInt(x.rejected[0]!.highest));
        expect(x.terms[1]!.ended).toMatch(/^lost/);
        expect(x.terms[2]!.ended).toBe('resigned');
        expect(x.writesAccepted).toBeGreaterThan(5);
      }
      const cli = s.sections[2]!;
      expect(cli.terms).toHaveLength(2);
      expect(BigInt(cli.terms[1]!.fence)).toBeGreaterThan(BigInt(cli.terms[0]!.fence));
      expect(cli.gaps[0]!.ms).toBeLessThan(s.ttlMs + 4000);
      expect(s.cliExitCode).toBe(0);

      for (const words of ['onElected', 'onDemoted(reason lost', 'onDemoted(reason resigned', 'in flight, is abandoned', 'drained', 'REJECTED', 'SIGKILL', 'SIGSTOP', 'session expired', 'TENURE_FENCE=', 'Summary', chart]) {
        expect(out, words).toContain(words);
      }
      expect(s.chart).toBe(chart);
      expect(existsSync(chart)).toBe(true);
      const svg = readFileSync(chart, 'utf8');
      expect(svg.startsWith('<svg')).toBe(true);
      for (const x of s.sections) for (const t of x.terms) {
        expect(svg, `${x.backend} ${t.name} ${t.fence}`).toContain(`${x.backend} term: ${t.name}, fence ${t.fence},`);
        expect(svg).toContain(`>fence ${t.fence}</text>`);
      }
      expect(svg).toContain('rejected write from');
      for (const pid of [...s.pids, ...s.serverPids]) expect(isRunning(pid), `pid ${pid} left running`).toBe(false);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 90_000);
});
