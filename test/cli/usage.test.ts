import { createServer, type AddressInfo } from 'node:net';
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
  ['a --grace that does not fit the TTL (run)', ['run', ...store, '--ttl', '2s', '--grace', '2s', '--', 'true'], /--grace: 2s does not fit --ttl 2s: .*use --ttl 4s or more/],
  ['a --grace that does not fit the TTL (lock)', ['lock', '--backend', 'redis', '--endpoints', '127.0.0.1:1', '--name', 'n', '--ttl', '3s', '--grace', '2100ms', '--', 'true'], /--grace: 2100ms does not fit --ttl 3s: .*use --ttl 3526ms or more/],
  ['a bad --timeout', ['lock', ...store, '--timeout', '5 minutes', '--', 'true'], /--timeout/],
  ['two Redis endpoints', ['run', '--backend', 'redis', '--endpoints', 'a:1,b:2', '--name', 'n', '--', 'true'], /--endpoints: redis takes one endpoint/],
  ['an unknown command', ['elect', ...store], /unknown command 'elect'/],
  // Secured stores (issue 21): no secret on the command line, none echoed.
  ['a --password on the command line', ['leader', ...store, '--user', 'app', '--password', 'S3cr3t'], /--password is not accepted.*use --password-file or TENURE_PASSWORD/],
  ['a malformed endpoint with a password', ['leader', '--backend', 'postgres', '--name', 'n'], /--endpoints: 'app:\[redacted\]@db:5432' is not host:port/, { TENURE_ENDPOINTS: 'app:S3cr3t@db:5432' }],
  ['a URL whose port is out of range, with a password', ['leader', '--backend', 'redis', '--name', 'n'], /--endpoints: 'redis:\/\/:\[redacted\]@h:99999' is not a valid URL/, { TENURE_ENDPOINTS: 'redis://:S3cr3t@h:99999' }],
  ['an empty endpoint beside a URL with a password', ['leader', '--backend', 'postgres', '--endpoints', 'postgres://app:S3cr3t@db/x,', '--name', 'n'], /--endpoints.*not a comma-separated list/],
  ['a bad TENURE_ENDPOINTS with a password', ['leader', '--backend', 'postgres', '--name', 'n'], /--endpoints.*not a comma-separated list/, { TENURE_ENDPOINTS: 'postgres://app:S3cr3t@db/x,,' }],
  ['--user without a password (etcd)', ['leader', ...store, '--user', 'app'], /--user: etcd needs the user's password \(--password-file or TENURE_PASSWORD\)/],
  ['a --password-file that cannot be read', ['leader', ...store, '--user', 'app', '--password-file', '/nonexistent/pw'], /--password-file: cannot read '\/nonexistent\/pw' \(ENOENT\)/],
  ['--cert without --key', ['leader', ...store, '--cert', 'package.json'], /--cert: give --cert and --key together/],
  ['TLS flags on ZooKeeper', ['leader', '--backend', 'zk', '--endpoints', '127.0.0.1:1', '--name', 'n', '--cacert', 'package.json'], /--cacert: ZooKeeper takes no TLS/],
  ['--acl on another backend', ['leader', ...store, '--acl', 'open'], /--acl: is for --backend zk only/],
  ['a bad --acl entry', ['leader', '--backend', 'zk', '--endpoints', '127.0.0.1:1', '--name', 'n', '--acl', 'world:anyone:rx'], /--acl.*not creator, open or scheme:id:perms/],
  ["--acl creator without --user", ['leader', '--backend', 'zk', '--endpoints', '127.0.0.1:1', '--name', 'n', '--acl', 'creator'], /--acl: 'creator' needs --user/],
  ['--sslmode prefer (tenure never falls back to plaintext)', ['leader', '--backend', 'postgres', '--endpoints', '127.0.0.1:1', '--name', 'n', '--sslmode', 'prefer'], /--sslmode.*'prefer'/],
  ['a --pass-env naming a variable tenure does not withhold', ['run', ...store, '--pass-env', 'HOME', '--', 'true'], /--pass-env.*'HOME' is not one of the variables tenure withholds/],
  ['a --call-timeout of 0', ['leader', ...store, '--call-timeout', '0'], /--call-timeout.*'0' is shorter than 10 ms/],
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
    expect(t.stderr()).not.toContain('S3cr3t');
  });

  it.each([['redis'], ['postgres'], ['zk']])('--call-timeout bounds each call: %s on a port that accepts and never answers exits 69 naming the bound', async (backend) => {
    const silent = createServer(() => undefined);
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
    try {
      const t = tenure(['leader', '--backend', backend, '--endpoints', `127.0.0.1:${(silent.address() as AddressInfo).port}`, '--name', 'n', '--call-timeout', '300ms'], { TENURE_BACKEND: '', TENURE_ENDPOINTS: '' });
      expect((await exitOf(t)).code, t.stderr()).toBe(69);
      expect(t.stderr()).toMatch(/within 300 ms|after 300 ms/);
    } finally {
      silent.close();
    }
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
