import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * The package as users get it: `npm pack` (which runs the build), the tarball unpacked into a
 * fresh consumer project's node_modules beside its dependencies, then every subpath imported at
 * run time and type-checked by `tsc --strict` over a consumer file. Dependencies come from this
 * checkout's node_modules (linked, not downloaded), so the test needs no network.
 */
const root = fileURLToPath(new URL('../../', import.meta.url));
const peers = ['etcd3', 'ioredis', 'pg', 'node-zookeeper-client', 'prom-client', 'inversify', '@inversifyjs', 'reflect-metadata'];
const runtime = ['eventemitter3', 'pino', 'cockatiel', 'croner', 'commander'];
const types = ['@types/node', '@types/pg', '@types/node-zookeeper-client'];
let work: string;
let pkg: string;

function link(project: string, names: string[]): void {
  for (const n of names) {
    const target = join(project, 'node_modules', n);
    mkdirSync(dirname(target), { recursive: true });
    symlinkSync(join(root, 'node_modules', n), target, 'dir');
  }
}

/** Links the package's bins into node_modules/.bin, as `npm install` does. */
function linkBins(project: string): void {
  const manifest = JSON.parse(readFileSync(join(project, 'node_modules/tenure/package.json'), 'utf8')) as { bin: Record<string, string> };
  mkdirSync(join(project, 'node_modules/.bin'), { recursive: true });
  for (const [name, file] of Object.entries(manifest.bin)) symlinkSync(join('..', 'tenure', file), join(project, 'node_modules/.bin', name));
}

/** A consumer project with tenure unpacked and `deps` linked. */
function project(name: string, deps: string[]): string {
  const dir = join(work, name);
  mkdirSync(join(dir, 'node_modules'), { recursive: true });
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name, type: 'module', private: true }));
  execFileSync('tar', ['-xzf', pkg, '-C', join(dir, 'node_modules')]);
  execFileSync('mv', [join(dir, 'node_modules', 'package'), join(dir, 'node_modules', 'tenure')]);
  link(dir, deps);
  return dir;
}

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((f) => {
    const p = join(dir, f);
    return statSync(p).isDirectory() ? files(p) : [p];
  });
}

beforeAll(() => {
  work = mkdtempSync(join(tmpdir(), 'tenure-consumer-'));
  const out = execFileSync('npm', ['pack', '--silent', '--pack-destination', work], { cwd: root, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
  pkg = join(work, out.trim().split('\n').at(-1)!);
}, 120_000);
afterAll(() => {
  if (work) rmSync(work, { recursive: true, force: true });
});

describe('the packed tarball in a fresh consumer project', () => {
  it('ships the LICENSE, declaration maps, and source maps whose sources resolve inside the package', () => {
    const dir = project('maps', []);
    const tenure = join(dir, 'node_modules', 'tenure');
    expect(readFileSync(join(tenure, 'LICENSE'), 'utf8')).toContain('Apache License');
    const maps = files(join(tenure, 'dist')).filter((f) => f.endsWith('.map'));
    expect(maps.some((m) => m.endsWith('.d.ts.map'))).toBe(true);
    expect(maps.some((m) => m.endsWith('.js.map'))).toBe(true);
    for (const m of maps) {
      const { sources } = JSON.parse(readFileSync(m, 'utf8')) as { sources: string[] };
      for (const s of sources) expect(existsSync(resolve(dirname(m), s)), `${m} → ${s}`).toBe(true);
    }
    const manifest = JSON.parse(readFileSync(join(tenure, 'package.json'), 'utf8')) as { dependencies: Record<string, string> };
    for (const v of Object.values(manifest.dependencies)) expect(v).toMatch(/^\^/);
  });

  it('imports every subpath at run time and type-checks a strict consumer file', () => {
    const dir = project('full', [...peers, ...runtime, ...types]);
    const consumer = `
import { InMemoryFencedResource, TenureError, type Candidate, type Lease, type LeaderInfo, type WaitOptions } from 'tenure';
import { EtcdElection, EtcdSession, type Term } from 'tenure/etcd';
import { LeaderLatch, ZkSession, InterProcessMutex } from 'tenure/zk';
import { RedisLock, RedisElection, RedisFencedResource } from 'tenure/redis';
import { PgElection, withXactLock, PostgresFencedResource } from 'tenure/postgres';
import { EtcdServer, RedisServer, FaultProxy, spawnWorker } from 'tenure/testing';
import { TenureMetrics } from 'tenure/metrics';
import { leadershipModule } from 'tenure/inversify';

export async function useIt(c: Candidate, wait: WaitOptions): Promise<bigint> {
  await using term: Lease = await c.campaign(wait);
  const who: LeaderInfo | undefined = await c.leader();
  const r = new InMemoryFencedResource('r');
  await r.write(term.fence, () => who?.id);
  return term.fence;
}
export const kinds = [EtcdElection, EtcdSession, LeaderLatch, ZkSession, InterProcessMutex, RedisLock, RedisElection, RedisFencedResource, PgElection, withXactLock, PostgresFencedResource, EtcdServer, RedisServer, FaultProxy, spawnWorker, TenureError, TenureMetrics, leadershipModule];
export type T = Term;
`;
    writeFileSync(join(dir, 'consumer.ts'), consumer);
    writeFileSync(
      join(dir, 'tsconfig.json'),
      JSON.stringify({ compilerOptions: { strict: true, module: 'nodenext', moduleResolution: 'nodenext', target: 'es2022', lib: ['es2023', 'esnext.disposable'], noEmit: true, types: ['node'], skipLibCheck: false }, files: ['consumer.ts'] }),
    );
    execFileSync(process.execPath, [join(root, 'node_modules/typescript/bin/tsc'), '-p', dir], { cwd: dir, encoding: 'utf8' });
    const script = `for (const p of ['tenure', 'tenure/zk', 'tenure/etcd', 'tenure/redis', 'tenure/postgres', 'tenure/testing', 'tenure/metrics', 'tenure/inversify']) { const m = await import(p); if (Object.keys(m).length === 0) throw new Error(p); } console.log('ok');`;
    expect(execFileSync(process.execPath, ['--input-type=module', '-e', script], { cwd: dir, encoding: 'utf8' }).trim()).toBe('ok');
  }, 180_000);

  it('a backend entry imported without its client package fails with a MissingPeerError naming the package', () => {
    const dir = project('bare', runtime);
    const script = `
const out = [];
for (const [entry] of [['tenure/etcd'], ['tenure/zk'], ['tenure/redis'], ['tenure/postgres'], ['tenure/metrics'], ['tenure/inversify']]) {
  try { await import(entry); out.push(entry + ' loaded'); } catch (e) { out.push(entry + ' ' + e.code + ' ' + e.packageName + ' ' + e.message); }
}
await import('tenure');
console.log(JSON.stringify(out));`;
    const out = JSON.parse(execFileSync(process.execPath, ['--input-type=module', '-e', script], { cwd: dir, encoding: 'utf8' })) as string[];
    expect(out).toEqual([
      expect.stringMatching(/^tenure\/etcd PEER_MISSING etcd3 .*npm install etcd3/),
      expect.stringMatching(/^tenure\/zk PEER_MISSING node-zookeeper-client .*npm install node-zookeeper-client/),
      expect.stringMatching(/^tenure\/redis PEER_MISSING ioredis .*npm install ioredis/),
      expect.stringMatching(/^tenure\/postgres PEER_MISSING pg .*npm install pg/),
      expect.stringMatching(/^tenure\/metrics PEER_MISSING prom-client .*npm install prom-client/),
      expect.stringMatching(/^tenure\/inversify PEER_MISSING inversify .*npm install inversify/),
    ]);
  });

  it('npx tenure runs the CLI from the built package: --help, a bad flag exits 2, a backend without its client names the package', () => {
    const dir = project('bin', runtime);
    linkBins(dir);
    const npx = (...args: string[]) => spawnSync('npx', ['--no-install', 'tenure', ...args], { cwd: dir, encoding: 'utf8', env: { ...process.env, TENURE_BACKEND: '', TENURE_ENDPOINTS: '' } });
    const help = npx('--help');
    expect(help.status, help.stderr).toBe(0);
    expect(help.stdout).toMatch(/Usage: tenure.*\n[\s\S]*run \[options\] <command\.\.\.>/);
    const runHelp = npx('run', '--help');
    expect(runHelp.status).toBe(0);
    expect(runHelp.stdout).toMatch(/--grace <duration>/);
    const bad = npx('run', '--backend', 'etcd', '--endpoints', '127.0.0.1:1', '--name', 'n', '--ttl', 'soon', '--', 'true');
    expect(bad.status).toBe(2);
    expect(bad.stderr.trim()).toMatch(/^tenure: option '--ttl <duration>' argument 'soon' is invalid/);
    const peerless = npx('leader', '--backend', 'etcd', '--endpoints', '127.0.0.1:1', '--name', 'n');
    expect(peerless.status).toBe(2);
    expect(peerless.stderr.trim()).toBe('tenure: --backend: etcd needs the package etcd3 (npm install etcd3)');
  }, 60_000);
});
