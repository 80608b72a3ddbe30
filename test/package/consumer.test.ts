import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, symlinkSync, mkdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { files, pack, PEERS as peers, project as unpack, root, RUNTIME as runtime, tsc, TYPES as types } from './pack.js';

/**
 * The package as users get it: `npm pack` (which runs the build), the tarball unpacked into a
 * fresh consumer project's node_modules beside its dependencies, then every subpath imported at
 * run time and type-checked by `tsc --strict` over a consumer file. Dependencies come from this
 * checkout's node_modules (linked, not downloaded), so the test needs no network.
 */
let work: string;
let pkg: string;
const SUBPATHS = ['tenure', 'tenure/zk', 'tenure/etcd', 'tenure/redis', 'tenure/postgres', 'tenure/testing', 'tenure/metrics', 'tenure/inversify'];

/** Links the package's bins into node_modules/.bin, as `npm install` does. */
function linkBins(project: string): void {
  const manifest = JSON.parse(readFileSync(join(project, 'node_modules/tenure/package.json'), 'utf8')) as { bin: Record<string, string> };
  mkdirSync(join(project, 'node_modules/.bin'), { recursive: true });
  for (const [name, file] of Object.entries(manifest.bin)) symlinkSync(join('..', 'tenure', file), join(project, 'node_modules/.bin', name));
}

const project = (name: string, deps: string[], type?: 'module' | 'commonjs'): string => unpack(work, pkg, name, deps, type);

beforeAll(() => {
  work = mkdtempSync(join(tmpdir(), 'tenure-consumer-'));
  pkg = pack(work).tarball;
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

  it('every relative link in the shipped README and docs resolves inside the tarball, anchors included', () => {
    const tenure = join(project('docs', []), 'node_modules', 'tenure');
    const docs = files(tenure).filter((f) => f.endsWith('.md'));
    expect(docs.map((f) => f.slice(tenure.length + 1)).sort()).toEqual(expect.arrayContaining(['README.md', 'CHANGELOG.md', 'docs/choosing.md', 'docs/leader.md', 'examples/README.md', 'chaos/README.md']));
    // GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens.
    const slug = (heading: string) => heading.trim().toLowerCase().replace(/[^\p{L}\p{N} _-]/gu, '').replace(/ /g, '-');
    const anchors = (file: string) => new Set(strip(readFileSync(file, 'utf8')).split('\n').filter((l) => /^#{1,6} /.test(l)).map((l) => slug(l.replace(/^#+ /, ''))));
    const strip = (md: string) => md.replace(/^```[\s\S]*?^```/gm, '');
    const broken: string[] = [];
    let checked = 0;
    for (const doc of docs) {
      for (const [, target] of strip(readFileSync(doc, 'utf8')).matchAll(/\]\(([^)\s]+)\)/g)) {
        if (/^[a-z]+:/i.test(target!)) continue; // absolute (https:, mailto:): not the package's
        checked++;
        const [path, anchor] = target!.split('#') as [string, string | undefined];
        const file = path === '' ? doc : resolve(dirname(doc), path);
        const where = `${doc.slice(tenure.length + 1)} → ${target}`;
        if (!file.startsWith(tenure + '/') || !existsSync(file)) broken.push(`${where}: not in the tarball`);
        else if (anchor && file.endsWith('.md') && !anchors(file).has(anchor)) broken.push(`${where}: no such heading`);
      }
    }
    expect(broken).toEqual([]);
    expect(checked).toBeGreaterThan(15);
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
import { TenureModule, LeadershipService, type TenureModuleOptions } from 'tenure/nestjs';

export const nest = (o: TenureModuleOptions) => [TenureModule.forRoot(o), LeadershipService] as const;
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
    tsc(dir);
    const script = `for (const p of ['tenure', 'tenure/zk', 'tenure/etcd', 'tenure/redis', 'tenure/postgres', 'tenure/testing', 'tenure/metrics', 'tenure/inversify', 'tenure/nestjs']) { const m = await import(p); if (Object.keys(m).length === 0) throw new Error(p); } console.log('ok');`;
    expect(execFileSync(process.execPath, ['--input-type=module', '-e', script], { cwd: dir, encoding: 'utf8' }).trim()).toBe('ok');
  }, 180_000);

  it('every subpath is require()d from CommonJS (Node ≥ 20.19: no entry has a top-level await)', () => {
    const dir = project('cjs', [...peers, ...runtime], 'commonjs');
    writeFileSync(join(dir, 'main.cjs'), `
const out = {};
for (const p of SUBPATHS) out[p] = Object.keys(require(p)).length;
console.log(JSON.stringify(out));`.replace('SUBPATHS', JSON.stringify(SUBPATHS)));
    const r = spawnSync(process.execPath, ['main.cjs'], { cwd: dir, encoding: 'utf8' });
    expect(r.status, r.stderr).toBe(0);
    expect(r.stderr).toBe(''); // no ExperimentalWarning, no ERR_REQUIRE_ASYNC_MODULE
    const counts = JSON.parse(r.stdout) as Record<string, number>;
    expect(Object.keys(counts)).toEqual(SUBPATHS);
    for (const [p, n] of Object.entries(counts)) expect(n, p).toBeGreaterThan(0);
  });

  it('a classic CommonJS TypeScript project (module commonjs, moduleResolution node10, as NestJS sets up) finds every subpath\'s types', () => {
    const dir = project('node10', [...peers, ...runtime, ...types], 'commonjs');
    writeFileSync(join(dir, 'consumer.ts'), `
import { TenureError, type Lease } from 'tenure';
import { EtcdSession } from 'tenure/etcd';
import { ZkSession, digestAcl } from 'tenure/zk';
import { RedisLock } from 'tenure/redis';
import { PgElection } from 'tenure/postgres';
import { EtcdServer } from 'tenure/testing';
import { TenureMetrics } from 'tenure/metrics';
import { leadershipModule } from 'tenure/inversify';
export const kinds = [TenureError, EtcdSession, ZkSession, digestAcl, RedisLock, PgElection, EtcdServer, TenureMetrics, leadershipModule];
export const fence = (l: Lease): bigint => l.fence;
`);
    writeFileSync(
      join(dir, 'tsconfig.json'),
      JSON.stringify({ compilerOptions: { strict: true, module: 'commonjs', moduleResolution: 'node10', target: 'es2022', lib: ['es2023', 'esnext.disposable'], noEmit: true, types: ['node'], esModuleInterop: true, skipLibCheck: true, noImplicitAny: true }, files: ['consumer.ts'] }),
    );
    tsc(dir);
  }, 120_000);

  it('publint and arethetypeswrong find nothing wrong with the tarball', () => {
    const publint = spawnSync(process.execPath, [join(root, 'node_modules/publint/src/cli.js'), 'run', pkg, '--strict'], { encoding: 'utf8' });
    expect(publint.status, publint.stdout + publint.stderr).toBe(0);
    expect(publint.stdout).toContain('All good!');
    // CJSResolvesToESM is TypeScript's view under module node16; Node ≥ 20.19 require()s every
    // entry (the test above), and so does TypeScript ≥ 5.8 under module nodenext.
    const attw = spawnSync(process.execPath, [join(root, 'node_modules/@arethetypeswrong/cli/dist/index.js'), pkg, '--ignore-rules', 'cjs-resolves-to-esm', '--format', 'ascii'], { encoding: 'utf8' });
    expect(attw.status, attw.stdout + attw.stderr).toBe(0);
    expect(attw.stdout).toMatch(/No problems found/);
  }, 120_000);

  it('without its client package, etcd and zk fail with a MissingPeerError naming it when they first need it; redis and postgres never load one; metrics and inversify fail to import naming it', () => {
    const dir = project('bare', runtime);
    const script = `
const out = [];
const peerless = async (what, f) => { try { await f(); out.push(what + ' ok'); } catch (e) { out.push(what + ' ' + e.code + ' ' + e.packageName + ' ' + e.message.split('\\n')[0]); } };
const etcd = await import('tenure/etcd');
const zk = await import('tenure/zk');
await peerless('EtcdSession.create', () => etcd.EtcdSession.create({ hosts: ['http://127.0.0.1:1'], ttlMs: 2000 }));
await peerless('createEtcdClient', () => etcd.createEtcdClient({ hosts: ['http://127.0.0.1:1'] }));
await peerless('ZkSession.create', () => zk.ZkSession.create({ connectionString: '127.0.0.1:1', ttlMs: 2000 }));
await peerless('digestAcl', () => zk.digestAcl('u', 'p'));
for (const entry of ['tenure/redis', 'tenure/postgres', 'tenure/metrics', 'tenure/inversify', 'tenure/nestjs', 'tenure']) await peerless(entry, () => import(entry));
console.log(JSON.stringify(out));`;
    const out = JSON.parse(execFileSync(process.execPath, ['--input-type=module', '-e', script], { cwd: dir, encoding: 'utf8' })) as string[];
    expect(out).toEqual([
      expect.stringMatching(/^EtcdSession.create PEER_MISSING etcd3 .*npm install etcd3/),
      expect.stringMatching(/^createEtcdClient PEER_MISSING etcd3 .*npm install etcd3/),
      expect.stringMatching(/^ZkSession.create PEER_MISSING node-zookeeper-client .*npm install node-zookeeper-client/),
      'digestAcl ok',
      'tenure/redis ok',
      'tenure/postgres ok',
      expect.stringMatching(/^tenure\/metrics ERR_MODULE_NOT_FOUND undefined Cannot find package 'prom-client'/),
      expect.stringMatching(/^tenure\/inversify ERR_MODULE_NOT_FOUND undefined Cannot find package 'inversify'/),
      expect.stringMatching(/^tenure\/nestjs ERR_MODULE_NOT_FOUND undefined Cannot find package '@nestjs\/common'/),
      'tenure ok',
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
