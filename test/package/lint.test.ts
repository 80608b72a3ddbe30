import { fileURLToPath } from 'node:url';
import { ESLint } from 'eslint';
import { expect, it } from 'vitest';

/**
 * The rules that keep the layers and the error surface honest run in `npm test`, not only in
 * `npm run lint`: core imports no backend, a backend imports only core and never another
 * backend, lifecycle imports only core, the CLI (src/cli) may import every backend but not the
 * test kit and nothing imports the CLI, backend clients load through peer.ts, and no plain Error
 * leaves src/ (eslint.config.js).
 */
const cwd = fileURLToPath(new URL('../../', import.meta.url));

it('src/ passes the lint rules that enforce layering, the error surface and peer loading', async () => {
  const eslint = new ESLint({ cwd });
  const results = await eslint.lintFiles(['src']);
  const problems = results.flatMap((r) => r.messages.map((m) => `${r.filePath.replace(/.*\/src\//, 'src/')}:${m.line} ${m.ruleId}: ${m.message}`));
  expect(problems).toEqual([]);
}, 60_000);

it.each([
  ['src/cli/x.ts', "import { EtcdServer } from '../testing/index.js';"],
  ['src/lifecycle/x.ts', "import { main } from '../cli/main.js';"],
  ['src/recipes/etcd/x.ts', "import { main } from '../../cli/main.js';"],
  ['src/core/x.ts', "import { main } from '../cli/main.js';"],
  ['src/index.ts', "export { main } from './cli/main.js';"],
  ['src/testing/x.ts', "import { main } from '../cli/main.js';"],
  ['src/lifecycle/x.ts', "import { EtcdSession } from '../recipes/etcd/index.js';"],
])('the layering rule refuses, in %s: %s', async (filePath, code) => {
  const [result] = await new ESLint({ cwd }).lintText(`${code}\nexport const x = 1;\n`, { filePath });
  expect(result!.messages.map((m) => m.ruleId)).toContain('no-restricted-imports');
});

it('the CLI may import every backend', async () => {
  const code = ['etcd', 'zk', 'redis', 'postgres'].map((b) => `export * as ${b} from '../recipes/${b}/index.js';`).join('\n');
  const [result] = await new ESLint({ cwd }).lintText(`${code}\n`, { filePath: 'src/cli/x.ts' });
  expect(result!.messages).toEqual([]);
});
