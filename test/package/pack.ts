import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * The package as users get it, for the tests in test/package: `npm pack` (which runs the build)
 * once per test file, and the tarball unpacked into fresh consumer projects whose dependencies
 * are linked from this checkout's node_modules (no network).
 */
export const root = fileURLToPath(new URL('../../', import.meta.url));

/** What `npm install tenure` brings besides tenure: its `dependencies`. */
export const RUNTIME = ['eventemitter3', 'cockatiel', 'croner', 'commander'];
/** The optional peers and what they need. */
export const PEERS = ['etcd3', 'ioredis', 'pg', 'node-zookeeper-client', 'prom-client', 'inversify', '@inversifyjs', 'reflect-metadata', '@nestjs', 'rxjs'];
/** The type packages a TypeScript consumer adds. */
export const TYPES = ['@types/node', '@types/pg', '@types/node-zookeeper-client'];

/** One file of `npm pack --json`. */
export interface PackedFile {
  path: string;
  size: number;
}

/** What `npm pack --json` reports. */
export interface Packed {
  /** The tarball's path. */
  tarball: string;
  entryCount: number;
  unpackedSize: number;
  files: PackedFile[];
}

/** This checkout's pack lock: `npm pack` rebuilds dist/, and two test files packing at once would race on it. */
const LOCK = join(tmpdir(), `tenure-pack-${createHash('sha1').update(root).digest('hex').slice(0, 12)}.lock`);

/** Runs `fn` holding {@link LOCK} (a directory: mkdir is atomic), waiting up to 5 min for it. */
function locked<T>(fn: () => T): T {
  const pause = new Int32Array(new SharedArrayBuffer(4));
  for (let waited = 0; ; waited += 200) {
    try {
      mkdirSync(LOCK);
      break;
    } catch (e) {
      if ((e as { code?: string }).code !== 'EEXIST') throw e;
      // A lock older than a pack can take is a killed run's: take it over.
      const held = statSync(LOCK, { throwIfNoEntry: false });
      // eslint-disable-next-line no-restricted-properties -- a file's age is wall-clock time; no lease depends on it
      if (waited >= 300_000 || (held && Date.now() - held.mtimeMs > 300_000)) rmSync(LOCK, { recursive: true, force: true });
      Atomics.wait(pause, 0, 0, 200);
    }
  }
  try {
    return fn();
  } finally {
    rmSync(LOCK, { recursive: true, force: true });
  }
}

/** Packs this checkout into `dir` (building it first, as `npm pack` runs `prepare`), one test file at a time. */
export function pack(dir: string): Packed {
  const out = locked(() => execFileSync('npm', ['pack', '--json', '--pack-destination', dir], { cwd: root, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'], maxBuffer: 64 << 20 }));
  const [info] = JSON.parse(out.slice(out.indexOf('['))) as [{ filename: string; entryCount: number; unpackedSize: number; files: PackedFile[] }];
  return { tarball: join(dir, info.filename), entryCount: info.entryCount, unpackedSize: info.unpackedSize, files: info.files };
}

/** Links `names` from this checkout's node_modules into `project`'s. */
export function link(project: string, names: string[]): void {
  for (const n of names) {
    const target = join(project, 'node_modules', n);
    mkdirSync(dirname(target), { recursive: true });
    symlinkSync(join(root, 'node_modules', n), target, 'dir');
  }
}

/** A consumer project `work/name` with the tarball unpacked as node_modules/tenure and `deps` linked. */
export function project(work: string, tarball: string, name: string, deps: string[], type: 'module' | 'commonjs' = 'module'): string {
  const dir = join(work, name);
  mkdirSync(join(dir, 'node_modules'), { recursive: true });
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name, type, private: true }));
  execFileSync('tar', ['-xzf', tarball, '-C', join(dir, 'node_modules')]);
  execFileSync('mv', [join(dir, 'node_modules', 'package'), join(dir, 'node_modules', 'tenure')]);
  link(dir, deps);
  return dir;
}

/** Every file under `dir`. */
export function files(dir: string): string[] {
  return readdirSync(dir).flatMap((f) => {
    const p = join(dir, f);
    return statSync(p).isDirectory() ? files(p) : [p];
  });
}

/** The installed tenure's package.json in a consumer project. */
export function manifest(dir: string): Record<string, unknown> {
  return JSON.parse(readFileSync(join(dir, 'node_modules/tenure/package.json'), 'utf8')) as Record<string, unknown>;
}

/** Runs tsc from this checkout over a consumer project's tsconfig. */
export function tsc(dir: string, tsconfig = 'tsconfig.json'): void {
  execFileSync(process.execPath, [join(root, 'node_modules/typescript/bin/tsc'), '-p', join(dir, tsconfig)], { cwd: dir, encoding: 'utf8' });
}
