import { fileURLToPath } from 'node:url';
import { ESLint } from 'eslint';
import { expect, it } from 'vitest';

/**
 * The rules that keep the layers and the error surface honest run in `npm test`, not only in
 * `npm run lint`: core imports no backend, a backend imports only core and never another
 * backend, lifecycle imports only core, backend clients load through peer.ts, and no plain Error
 * leaves src/ (eslint.config.js).
 */
it('src/ passes the lint rules that enforce layering, the error surface and peer loading', async () => {
  const eslint = new ESLint({ cwd: fileURLToPath(new URL('../../', import.meta.url)) });
  const results = await eslint.lintFiles(['src']);
  const problems = results.flatMap((r) => r.messages.map((m) => `${r.filePath.replace(/.*\/src\//, 'src/')}:${m.line} ${m.ruleId}: ${m.message}`));
  expect(problems).toEqual([]);
}, 60_000);
