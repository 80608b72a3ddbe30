import { readFileSync } from 'node:fs';
import { expect, it } from 'vitest';
import { root } from './pack.js';

/**
 * The peer ranges promise only what the suite runs: every peer's devDependency (the version the
 * tests use) lies inside its peer range, and a client whose private internals tenure reads
 * (node-zookeeper-client: its connection manager's queue and its jute protocol module, see
 * src/recipes/zk/ops.ts; pg: a client's `processID`, `secretKey`, `host` and `port`, which the
 * cancel of an abandoned wait is built from, see src/recipes/postgres/cancel.ts and
 * test/postgres/pg-internals.test.ts) is pinned to the patch releases of the tested version.
 */
const manifest = JSON.parse(readFileSync(`${root}package.json`, 'utf8')) as { peerDependencies: Record<string, string>; devDependencies: Record<string, string> };
const PINNED = ['node-zookeeper-client', 'pg'];

it.each(Object.entries(manifest.peerDependencies))('the tested version of %s is inside its peer range %s', (name, range) => {
  const tested = manifest.devDependencies[name];
  expect(tested, `${name} is a devDependency`).toMatch(/^\d+\.\d+\.\d+$/);
  const [major, minor, patch] = tested!.split('.').map(Number) as [number, number, number];
  const inside = range.split('||').some((alt) => {
    const m = /^\s*([~^])(\d+)\.(\d+)\.(\d+)\s*$/.exec(alt);
    if (!m) return false;
    const [, op, a, b, c] = m as unknown as [string, string, string, string, string];
    const base = [Number(a), Number(b), Number(c)] as const;
    const atLeast = major > base[0] || (major === base[0] && (minor > base[1] || (minor === base[1] && patch >= base[2])));
    return atLeast && major === base[0] && (op === '^' || minor === base[1]);
  });
  expect(inside, `${name}@${tested} in ${range}`).toBe(true);
  if (PINNED.includes(name)) expect(range).toBe(`~${tested}`);
});
