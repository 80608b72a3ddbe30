import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { expect, it } from 'vitest';

/**
 * `npm run docs` builds the API reference from the doc comments of every entry point
 * (typedoc.json); a missing doc comment on an exported name, or a broken link, is a warning and
 * every warning fails it (treatWarningsAsErrors). This runs the same check without writing HTML.
 */
it('the API reference builds with no warnings: every exported name is documented', () => {
  const cwd = fileURLToPath(new URL('../../', import.meta.url));
  const r = spawnSync(process.execPath, ['node_modules/typedoc/bin/typedoc', '--emit', 'none'], { cwd, encoding: 'utf8' });
  const out = `${r.stdout}${r.stderr}`.replace(/\x1b\[[0-9;]*m/g, ''); // eslint-disable-line no-control-regex
  expect(out.split('\n').filter((l) => /\[(warning|error)\]/.test(l)), out).toEqual([]);
  expect(r.status, out).toBe(0);
}, 90_000);
