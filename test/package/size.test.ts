import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { manifest, pack, project, root, RUNTIME, type Packed } from './pack.js';

/**
 * The README's "what an install costs" table, measured from the packed tarball so it cannot creep
 * back unnoticed: the tarball's files and unpacked size (within 10 % of the row, so the row stays
 * true), the packages a bare `npm install tenure` adds, and what `import 'tenure'` loads — its own
 * files and the packages, walked over the shipped JavaScript, exactly. The import time is printed,
 * not bounded (a stopwatch on a shared machine is noise; the file list is what makes it).
 */
let work: string;
let packed: Packed;
let dir: string;

beforeAll(() => {
  work = mkdtempSync(join(tmpdir(), 'tenure-size-'));
  packed = pack(work);
  dir = project(work, packed.tarball, 'size', RUNTIME);
}, 120_000);
afterAll(() => {
  if (work) rmSync(work, { recursive: true, force: true });
});

/** The README row whose first cell is `label`: its second cell. */
function row(label: string): string {
  const readme = readFileSync(join(root, 'README.md'), 'utf8');
  const line = readme.split('\n').find((l) => l.startsWith(`| ${label} |`));
  expect(line, `README row "${label}"`).toBeDefined();
  return line!.split('|')[2]!.trim();
}

/** The packages `names` pull in, themselves included (their `dependencies`, transitively). */
function closure(names: string[], from = join(root, 'node_modules')): Set<string> {
  const seen = new Set<string>();
  const visit = (name: string, base: string): void => {
    if (seen.has(name)) return;
    seen.add(name);
    const nested = join(base, name, 'node_modules');
    const m = JSON.parse(readFileSync(join(base, name, 'package.json'), 'utf8')) as { dependencies?: Record<string, string> };
    for (const d of Object.keys(m.dependencies ?? {})) visit(d, existsSync(join(nested, d)) ? nested : from);
  };
  for (const n of names) visit(n, from);
  return seen;
}

/** What importing `entry` loads: tenure's own files (static imports, followed) and the packages they import. */
function graph(entry: string): { own: Set<string>; packages: Set<string> } {
  const own = new Set<string>();
  const packages = new Set<string>();
  const pending = [entry];
  const base = join(dir, 'node_modules/tenure');
  while (pending.length > 0) {
    const file = pending.pop()!;
    if (own.has(file)) continue;
    own.add(file);
    const code = readFileSync(file, 'utf8');
    // tsc's output: one static import or re-export per statement (dynamic `import(` is not followed: it loads on use).
    for (const [, spec] of code.matchAll(/(?:^|\n)(?:import|export)\s+(?:[^'";]*?\sfrom\s+)?'([^']+)';/g)) {
      if (spec!.startsWith('.')) pending.push(resolve(dirname(file), spec!));
      else if (!spec!.startsWith('node:')) packages.add(spec!.startsWith('@') ? spec!.split('/').slice(0, 2).join('/') : spec!.split('/')[0]!);
    }
  }
  return { own: new Set([...own].map((f) => relative(base, f))), packages };
}

it("the README's size table holds for the packed tarball", () => {
  const mb = (n: number) => n / 1e6;
  console.log(`files ${packed.entryCount}, unpacked ${mb(packed.unpackedSize).toFixed(2)} MB`);
  // A bare install: tenure and the closure of its dependencies (peers are optional and not installed).
  const deps = Object.keys((manifest(dir).dependencies ?? {}) as Record<string, string>).sort();
  const installed = [...closure(deps)].sort();
  const { own, packages } = graph(join(dir, 'node_modules/tenure/dist/index.js'));
  console.log(`packages: ${installed.length + 1} (tenure, ${installed.join(', ')}); import 'tenure' loads ${own.size} of tenure's, and ${[...packages].sort().join(', ')}`);
  expect(deps).toEqual([...RUNTIME].sort());
  expect(row('packages a bare `npm install tenure` adds')).toBe(`${installed.length + 1} (tenure, ${installed.join(', ')})`);

  const files = Number(/^(\d[\d,]*) /.exec(row('files in the tarball'))![1]!.replace(/,/g, ''));
  const size = Number(/^([\d.]+) MB/.exec(row('unpacked size'))![1]);
  expect(Math.abs(packed.entryCount - files) / files, `${packed.entryCount} files vs the README's ${files}`).toBeLessThanOrEqual(0.1);
  expect(Math.abs(mb(packed.unpackedSize) - size) / size, `${mb(packed.unpackedSize)} MB vs the README's ${size}`).toBeLessThanOrEqual(0.1);
  // The test kit, the CLI and the backends stay out of `import 'tenure'`.
  expect([...own].filter((f) => !/^dist\/(core|lifecycle)\/|^dist\/index\.js$/.test(f))).toEqual([]);
  expect(row("files `import 'tenure'` loads")).toBe(`${own.size} of tenure's, and ${[...packages].sort().join(', ')}`);
});

it('no runtime entry loads a file of the test kit or the CLI', () => {
  const exports = manifest(dir).exports as Record<string, { default?: string } | string>;
  const entries = Object.entries(exports).filter(([k, v]) => k !== './testing' && typeof v === 'object');
  expect(entries.length).toBeGreaterThanOrEqual(7);
  for (const [entry, target] of entries) {
    const { own } = graph(join(dir, 'node_modules/tenure', (target as { default: string }).default));
    expect([...own].filter((f) => /^dist\/(testing|cli)\//.test(f)), entry).toEqual([]);
  }
});

it("`import 'tenure'` succeeds in a fresh process; its time is printed (median of 5) for the README", () => {
  const script = `const t = performance.now(); await import('tenure'); console.log(performance.now() - t);`;
  const times = Array.from({ length: 5 }, () => Number(execFileSync(process.execPath, ['--input-type=module', '-e', script], { cwd: dir, encoding: 'utf8' }).trim())).sort((a, b) => a - b);
  const median = times[2]!;
  console.log(`import 'tenure': median ${median.toFixed(1)} ms of ${times.map((t) => t.toFixed(1)).join(', ')}`);
  // No bound: a stopwatch on a shared 2-core machine is noise (300 ms beside a running tsc). The
  // guard against creep is the exact list of files and packages `import 'tenure'` loads, above;
  // this prints the figure the README states, from a quiet run.
  expect(times.every((t) => Number.isFinite(t) && t > 0)).toBe(true);
}, 60_000);
