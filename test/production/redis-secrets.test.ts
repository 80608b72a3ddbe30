import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { RedisFencedResource, RedisLock } from '../../src/recipes/redis/index.js';
import { PermissionDeniedError } from '../../src/index.js';
import { RedisServer, makeCertificates } from '../../src/testing/index.js';
import { expectNoSecret } from '../helpers/secrets.js';

/**
 * A refused Redis login keeps ioredis' handshake ReplyError as `cause`, and that error holds the
 * command it sent (`HELLO 3 AUTH user password`): no password may survive anywhere in the chain.
 */
const SECRET = 'tenure-Pa55-word';
const WRONG = 'not-the-Pa55-word';
const DISABLED = 'disabled-Pa55-word';
const ACL = '~tenure:* &tenure:* +@all';
const servers: RedisServer[] = [];
const clients: Redis[] = [];

beforeAll(async () => {
  const certs = await makeCertificates();
  const aclUsers = [`tenure on >${SECRET} ${ACL}`, `gone off >${DISABLED} ${ACL}`];
  servers.push(await new RedisServer({ aclUsers }).start(), await new RedisServer({ aclUsers, tls: certs }).start());
});
afterAll(async () => {
  for (const c of clients) c.disconnect();
  await Promise.all(servers.map((s) => s.stop()));
});

describe.each([
  ['plain', 0],
  ['TLS', 1],
])('Redis %s', (_kind, i) => {
  const connect = (username: string, password: string): Redis => {
    const s = servers[i]!;
    const c = new Redis({ ...s.endpoint, tls: s.tlsOptions, username, password, maxRetriesPerRequest: 1, lazyConnect: true });
    c.on('error', () => undefined);
    clients.push(c);
    return c;
  };

  it.each([
    ['a wrong password', 'tenure', WRONG],
    ['the right password of a disabled user', 'gone', DISABLED],
  ])('%s: acquire, tryAcquire and a fenced write are PermissionDeniedErrors with no password anywhere in their cause chain', async (_what, user, password) => {
    // A fresh connection per call: each sees the refused handshake itself.
    const locks: RedisLock[] = [];
    const lock = (): RedisLock => (locks.push(new RedisLock(connect(user, password), 'job', { ttlMs: 1000 })), locks.at(-1)!);
    const errors = [
      await lock().acquire({ timeoutMs: 3000 }).catch((e: unknown) => e),
      await lock().tryAcquire().catch((e: unknown) => e),
      await new RedisFencedResource(connect(user, password), 'tenure:{l}:fence').write(1n, (w) => w.set('tenure:{l}:x', 1)).catch((e: unknown) => e),
    ];
    for (const err of errors) {
      expect(err, String(err)).toBeInstanceOf(PermissionDeniedError);
      expectNoSecret(err, password, SECRET);
    }
    // On one connection too: the calls after the first meet ioredis' reconnect loop, whose
    // "max retries per request" hides the refusal everywhere but in the client's error events.
    const shared = connect(user, password);
    const one = new RedisLock(shared, 'job', { ttlMs: 1000 });
    locks.push(one);
    for (const err of [
      await one.acquire({ timeoutMs: 3000 }).catch((e: unknown) => e),
      await one.tryAcquire().catch((e: unknown) => e),
      await new RedisFencedResource(shared, 'tenure:{l}:fence').write(1n, (w) => w.set('tenure:{l}:x', 1)).catch((e: unknown) => e),
    ]) {
      expect(err, String(err)).toBeInstanceOf(PermissionDeniedError);
      expectNoSecret(err, password, SECRET);
    }
    await Promise.all(locks.map((l) => l.close()));
  });
});
