import { afterAll, beforeAll, expect, it } from 'vitest';
import { ZooKeeperServer } from '../../src/testing/index.js';
import { exitOf, tenure } from './helpers.js';

/**
 * ZooKeeper may grant a shorter session than `--ttl` asks for (its maxSessionTimeout): a `--grace`
 * that fit the TTL asked for may not fit the one granted, and tenure refuses to run rather than
 * let the SIGKILL land after the session could expire.
 */
let server: ZooKeeperServer;

beforeAll(async () => {
  server = await new ZooKeeperServer({ maxSessionTimeout: 3000 }).start();
});

afterAll(async () => {
  await server?.stop();
});

it('a --grace that does not fit the session ZooKeeper granted: exit 2 naming it, the command never runs', async () => {
  const t = tenure(['run', '--backend', 'zk', '--endpoints', server.connectionString, '--name', 'granted', '--ttl', '10s', '--grace', '5s', '--', 'sh', '-c', 'echo ran']);
  expect((await exitOf(t)).code, t.stderr()).toBe(2);
  expect(t.stderr()).toMatch(/^tenure: --ttl: the server granted a 3000 ms session \(its maxSessionTimeout\), too short for --grace/m);
  expect(t.stdout()).toBe('');
}, 30_000);
