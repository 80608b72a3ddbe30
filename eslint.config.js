import js from '@eslint/js';
import tseslint from 'typescript-eslint';

const backends = ['zk', 'etcd', 'redis', 'postgres'];

/**
 * The layers, enforced (data flows down): core imports no backend, no lifecycle, no kit; a
 * backend imports only core (never another backend); lifecycle imports only core.
 */
const layer = (files, patterns) => ({
  files,
  rules: {
    'no-restricted-imports': ['error', { patterns: patterns.map((group) => ({ group, message: 'Layering: core ← recipes/<backend>, core ← lifecycle; backends never import each other.' })) }],
  },
});

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', 'coverage/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: {
      globals: { process: 'readonly', console: 'readonly', setTimeout: 'readonly', clearTimeout: 'readonly' },
    },
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      'no-restricted-properties': [
        'error',
        { object: 'Date', property: 'now', message: 'Lease math uses the monotonic Clock (performance.now / hrtime), never wall-clock time.' },
      ],
    },
  },
  layer(['src/core/**/*.ts'], [['../recipes/**', '../lifecycle/**', '../testing/**', '../cli/**', '../integrations/**']]),
  ...backends.map((b) =>
    layer([`src/recipes/${b}/**/*.ts`], [[...backends.filter((o) => o !== b).map((o) => `../${o}/**`), '../../lifecycle/**', '../../testing/**', '../../cli/**', '../../integrations/**']]),
  ),
  layer(['src/lifecycle/**/*.ts'], [['../recipes/**', '../testing/**', '../cli/**', '../integrations/**']]),
);
