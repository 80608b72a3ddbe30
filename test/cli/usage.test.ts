import { describe, expect, it } from 'vitest';
import { exitOf, tenure } from './helpers.js';

/**
 * Bad usage never reaches a store: one line on stderr naming the flag (or what is missing), exit
 * code 2. `--help` works for every command.
 */
const store = ['--backend', 'etcd', '--endpoints', '127.0.0.1:1', '--name', 'n'];
const rows: [string, string[], RegExp, Record<string, string>?][] = [
  ['an unknown flag', ['run', ...store, '--bogus', '--', 'true'], /unknown option '--bogus'/],
  ['an unknown flag before the required ones', ['run', '--bogus', '--', 'true'], /unknown option '--bogus'/],
  ['a bad --ttl', ['run', ...store, '--ttl', 'banana', '--', 'true'], /--ttl.*'banana' is not a duration/],
  ['a negative --grace', ['run', ...store, '--grace', '-1s', '--', 'true'], /--grace/],
  ['a --ttl the store cannot take (etcd counts seconds)', ['run', ...store, '--ttl', '1500ms', '--', 'true'], /--ttl: must be a whole multiple of 1000 ms/],
  ['an unknown --backend', ['run', '--backend', 'consul', '--endpoints', 'x', '--name', 'n', '--', 'true'], /--backend.*'consul'.*etcd, zk, redis, postgres/],
  ['a bad TENURE_BACKEND', ['run', '--endpoints', 'x', '--name', 'n', '--', 'true'], /--backend.*TENURE_BACKEND/, { TENURE_BACKEND: 'mongo' }],
  ['no --backend', ['run', '--endpoints', 'x', '--name', 'n', '--', 'true'], /required option '--backend'/],
  ['no --endpoints', ['lock', '--backend', 'zk', '--name', 'n', '--', 'true'], /required option '--endpoints'/],
  ['an empty endpoint', ['leader', '--backend', 'zk', '--endpoints', 'a:1,,b:2', '--name', 'n'], /--endpoints.*not a comma-separated list/],
  ['no --name', ['leader', '--backend', 'zk', '--endpoints', 'x'], /required option '--name'/],
  ['an empty --id', ['run', ...store, '--id', '', '--', 'true'], /--id/],
  ['no command', ['run', ...store], /missing required argument 'command'/],
  ['a bad --timeout', ['lock', ...store, '--timeout', '5 minutes', '--', 'true'], /--timeout/],
  ['two Redis endpoints', ['run', '--backend', 'redis', '--endpoints', 'a:1,b:2', '--name', 'n', '--', 'true'], /--endpoints: redis takes one endpoint/],
  ['an unknown command', ['elect', ...store], /unknown command 'elect'/],
];

describe('tenure: bad usage', () => {
  it.each(rows)('%s: exit 2 with one line naming it', async (_what, args, message, env) => {
    const t = tenure(args, { TENURE_BACKEND: '', TENURE_ENDPOINTS: '', ...env });
    const { code } = await exitOf(t);
    const lines = t.stderr().trimEnd().split('\n');
    expect(code, t.stderr()).toBe(2);
    expect(lines, t.stderr()).toHaveLength(1);
    expect(lines[0]).toMatch(message);
    expect(t.stdout()).toBe('');
  });

  it('--backend and --endpoints from TENURE_BACKEND and TENURE_ENDPOINTS; a store that cannot be reached exits 69', async () => {
    const t = tenure(['run', '--name', 'n', '--', 'true'], { TENURE_BACKEND: 'etcd', TENURE_ENDPOINTS: '127.0.0.1:1' });
    expect((await exitOf(t)).code, t.stderr()).toBe(69);
    expect(t.stderr()).toMatch(/^tenure run n: store unreachable: etcd at http:\/\/127\.0\.0\.1:1/m);
  });

  it.each([['run'], ['lock'], ['leader'], ['']])('tenure %s --help: usage on stdout, exit 0', async (sub) => {
    const cmd = sub ? [sub] : [];
    const t = tenure([...cmd, '--help']);
    expect((await exitOf(t)).code).toBe(0);
    expect(t.stdout()).toMatch(/^Usage: tenure/);
    if (cmd.length) expect(t.stdout()).toMatch(/--backend <store>/);
  });
});
