import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { expect, it } from 'vitest';

/**
 * Fails the build if the Redis lock code ever takes a lock the unsafe ways: SETNX (no TTL in the
 * same command), a bare DEL for release (not owner-checked), or a SET without NX and PX.
 */
const root = new URL('../../', import.meta.url).pathname;
function files(dir: string): string[] {
  return readdirSync(dir).flatMap((f) => {
    const p = join(dir, f);
    return statSync(p).isDirectory() ? files(p) : p.endsWith('.ts') ? [p] : [];
  });
}
const sources = files(join(root, 'src/recipes/redis')).map((p) => ({
  path: p.slice(root.length),
  text: readFileSync(p, 'utf8'),
}));

it('scans the Redis lock sources (the scan itself sees the files)', () => {
  expect(sources.map((s) => s.path)).toEqual(expect.arrayContaining(['src/recipes/redis/lock.ts', 'src/recipes/redis/scripts.ts', 'src/recipes/redis/fenced-resource.ts']));
  expect(sources.find((s) => s.path === 'src/recipes/redis/scripts.ts')?.text).toMatch(/'SET', KEYS\[1\]/);
});

it('never uses SETNX', () => {
  for (const s of sources) expect(s.text, s.path).not.toMatch(/setnx/i);
});

it('never deletes a key without comparing the token first in the same script', () => {
  for (const s of sources) {
    expect(s.text, `${s.path}: client-side del()`).not.toMatch(/\.del\(/);
    expect(s.text, `${s.path}: client-side unlink()`).not.toMatch(/redis\.unlink\(|\.call\(['"]unlink/i);
    const lines = s.text.split('\n');
    lines.forEach((line, i) => {
      if (!/['"]DEL['"]/i.test(line)) return;
      const before = lines.slice(Math.max(0, i - 3), i).join('\n');
      expect(before, `${s.path}:${i + 1}: DEL not guarded by a token compare`).toMatch(/redis\.call\('GET', KEYS\[1\]\) == ARGV\[1\]/);
    });
  }
});

it('never sets a key without NX and PX (every lock has a TTL)', () => {
  for (const s of sources) {
    for (const m of s.text.matchAll(/redis\.call\(\s*['"]set['"][^)]*\)/gi)) {
      expect(m[0], s.path).toMatch(/'NX', 'PX'/);
    }
    expect(s.text, `${s.path}: client-side set()`).not.toMatch(/(redis|client|this\.#redis)\.set\(/);
    expect(s.text, `${s.path}: PERSIST`).not.toMatch(/['"]PERSIST['"]|\.persist\(/i);
  }
});
