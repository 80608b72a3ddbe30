import js from '@eslint/js';
import tseslint from 'typescript-eslint';

const backends = ['zk', 'etcd', 'redis', 'postgres'];

/**
 * The layers, enforced (data flows down): core imports no backend, no lifecycle, no kit; a
 * backend imports only core (never another backend); lifecycle imports only core; an
 * integration imports only lifecycle and core (never a backend or another integration); the CLI
 * is the one place that knows every backend, and nothing below it (nor the package root, nor the
 * kit) imports it, so the library never loads commander.
 */
const layer = (files, patterns) => ({
  files,
  rules: {
    'no-restricted-imports': ['error', { patterns: patterns.map((group) => ({ group, message: 'Layering: core ← recipes/<backend>, core ← lifecycle, everything ← cli; backends never import each other.' })) }],
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
  {
    // Users catch TenureError subclasses with a stable code: no plain errors leave src/.
    files: ['src/**/*.ts'],
    rules: {
      'no-restricted-syntax': [
        'error',
        { selector: "NewExpression[callee.name=/^(Error|TypeError|RangeError|SyntaxError)$/]", message: 'Throw a TenureError subclass with a code (src/core/errors.ts), not a plain Error.' },
        { selector: 'ThrowStatement > Literal', message: 'Never throw strings: throw a TenureError subclass.' },
      ],
    },
  },
  {
    // Backend clients load through each backend's peer.ts, so a missing one is a MissingPeerError
    // naming it, not a bare ERR_MODULE_NOT_FOUND at link time: only type imports elsewhere.
    files: ['src/recipes/**/*.ts'],
    ignores: ['src/recipes/*/peer.ts'],
    rules: {
      '@typescript-eslint/no-restricted-imports': ['error', { paths: ['etcd3', 'ioredis', 'pg', 'node-zookeeper-client'].map((name) => ({ name, allowTypeImports: true, message: "Import the client's values through ./peer.js." })) }],
    },
  },
  layer(['src/core/**/*.ts'], [['../recipes/**', '../lifecycle/**', '../testing/**', '../cli/**', '../integrations/**']]),
  ...backends.map((b) =>
    layer([`src/recipes/${b}/**/*.ts`], [[...backends.filter((o) => o !== b).map((o) => `../${o}/**`), '../../lifecycle/**', '../../testing/**', '../../cli/**', '../../integrations/**']]),
  ),
  layer(['src/lifecycle/**/*.ts'], [['../recipes/**', '../testing/**', '../cli/**', '../integrations/**']]),
  // Integrations (tenure/inversify, tenure/metrics, tenure/nestjs) sit on lifecycle and core; they know no backend.
  layer(['src/integrations/**/*.ts'], [['../../recipes/**', '../../testing/**', '../../cli/**', '../inversify/**', '../metrics/**', '../nestjs/**']]),
  layer(['src/cli/**/*.ts'], [['../testing/**', '../integrations/**']]),
  layer(['src/index.ts'], [['./cli/**', './testing/**']]),
  layer(['src/testing/**/*.ts'], [['../cli/**', '../../cli/**']]),
);
