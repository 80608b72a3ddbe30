import { execFileSync } from 'node:child_process';
import { cpSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { build, type BuildOptions } from 'esbuild';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EtcdServer, RedisServer } from '../../src/testing/index.js';
import { pack, project, root, RUNTIME } from './pack.js';

/**
 * A small app bundled with esbuild from the packed tarball (ESM and CommonJS output), then run
 * where no node_modules exists, against a real etcd and Redis: the peers tenure loads (etcd3) are
 * in the bundle because their specifiers are literal, and the CommonJS bundle does not crash on
 * `import.meta.url`. With the peer left out of the bundle, the missing package is still a
 * MissingPeerError naming it.
 */
let work: string;
let dir: string;
let etcd: EtcdServer;
let redis: RedisServer;

// An async main, not top-level await: the same source bundles to CommonJS.
const APP = `
import { EtcdSession, EtcdMutex } from 'tenure/etcd';
import { RedisLock } from 'tenure/redis';
import { Redis } from 'ioredis';

async function main() {
  const [etcdUrl, redisPort] = process.argv.slice(2);
  const session = await EtcdSession.create({ hosts: [etcdUrl], ttlMs: 2000 });
  const mutex = new EtcdMutex(session, 'bundled');
  const held = await mutex.acquire({ timeoutMs: 10000 });
  const etcdFence = held.fence;
  await held.release();
  await mutex.close();
  await session.close();
  const client = new Redis({ host: '127.0.0.1', port: Number(redisPort), lazyConnect: true });
  const lock = new RedisLock(client, 'bundled', { ttlMs: 2000, restartGuardMs: 0 });
  const lease = await lock.acquire({ timeoutMs: 10000 });
  const redisFence = lease.fence;
  await lease.release();
  await lock.close();
  client.disconnect();
  console.log(JSON.stringify({ etcd: String(etcdFence), redis: String(redisFence) }));
}
main().catch((e) => { console.log(JSON.stringify({ code: e.code, packageName: e.packageName, message: e.message })); process.exitCode = 1; });
`;

// esbuild's ESM output has no require or __dirname for the CommonJS packages it bundles (etcd3
// reads its .proto file from __dirname): the banner every ESM bundle of CommonJS code needs.
const ESM_BANNER = [
  "import { createRequire as __createRequire } from 'node:module';",
  "import { fileURLToPath as __fileURLToPath } from 'node:url';",
  "import { dirname as __dirnameOf } from 'node:path';",
  'const require = __createRequire(import.meta.url);',
  'const __filename = __fileURLToPath(import.meta.url);',
  'const __dirname = __dirnameOf(__filename);',
].join('\n');

/** Bundles the app as `format` into a directory of its own, with etcd3's proto file where etcd3 looks for it (`<bundle dir>/../proto`). */
async function bundle(name: string, format: 'esm' | 'cjs', extra: Partial<BuildOptions> = {}): Promise<string> {
  const out = join(work, name);
  const file = join(out, 'bin', format === 'esm' ? 'app.mjs' : 'app.cjs');
  const result = await build({
    entryPoints: [join(dir, 'app.mjs')],
    absWorkingDir: dir,
    bundle: true,
    platform: 'node',
    target: 'node20',
    format,
    outfile: file,
    logLevel: 'silent',
    ...(format === 'esm' ? { banner: { js: ESM_BANNER } } : {}),
    ...extra,
  });
  expect(result.errors).toEqual([]);
  cpSync(join(root, 'node_modules/etcd3/proto'), join(out, 'proto'), { recursive: true });
  return file;
}

function run(file: string): { status: number; out: Record<string, unknown>; stderr: string } {
  try {
    const stdout = execFileSync(process.execPath, [file, etcd.endpoints[0]!, String(redis.port)], { cwd: work, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: 30_000 });
    return { status: 0, out: JSON.parse(stdout.trim().split('\n').at(-1)!) as Record<string, unknown>, stderr: '' };
  } catch (e) {
    const err = e as { status: number; stdout: string; stderr: string };
    return { status: err.status, out: JSON.parse(err.stdout.trim().split('\n').at(-1) || '{}') as Record<string, unknown>, stderr: err.stderr };
  }
}

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), 'tenure-bundle-'));
  [etcd, redis] = await Promise.all([new EtcdServer().start(), new RedisServer().start()]);
  const packed = pack(work);
  dir = project(work, packed.tarball, 'app', [...RUNTIME, 'etcd3', 'ioredis']);
  writeFileSync(join(dir, 'app.mjs'), APP);
}, 120_000);
afterAll(async () => {
  await Promise.all([etcd?.stop(), redis?.stop()]);
  if (work) rmSync(work, { recursive: true, force: true });
});

describe('an app bundled with esbuild, run with no node_modules', () => {
  it.each(['esm', 'cjs'] as const)('as %s: takes a fenced lock on etcd and on Redis', async (format) => {
    const file = await bundle(`out-${format}`, format);
    const r = run(file);
    expect(r.status, `${JSON.stringify(r.out)} ${r.stderr}`).toBe(0);
    expect(BigInt(r.out.etcd as string)).toBeGreaterThan(0n);
    expect(BigInt(r.out.redis as string)).toBeGreaterThan(0n);
  }, 120_000);

  it.each(['esm', 'cjs'] as const)('as %s with etcd3 left out of the bundle: a MissingPeerError naming it', async (format) => {
    const file = await bundle(`peerless-${format}`, format, { external: ['etcd3'] });
    const r = run(file);
    expect(r.status).toBe(1);
    expect(r.out).toMatchObject({ code: 'PEER_MISSING', packageName: 'etcd3' });
  }, 120_000);
});
