import { afterAll, beforeAll, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { RedisElection, RedisFencedResource, RedisLock, RedisMembership } from '../../src/recipes/redis/index.js';
import { PermissionDeniedError } from '../../src/index.js';
import { RedisServer, makeCertificates } from '../../src/testing/index.js';

/**
 * Redis over TLS with ACL users: `tenure` holds exactly the commands tenure's recipes use, on
 * keys and channels under `tenure:`; `intruder` has the same commands on another pattern.
 */
const SECRET = 'tenure-Pa55-word';
/**
 * The least privileges of RedisLock / RedisElection / RedisMembership / RedisFencedResource (the
 * README lists them and says why each is there): no +ping, no whole +info.
 */
const TENURE_ACL = [
  '~tenure:*', '&tenure:*',
  // sent by the client: scripts, the release channel, a holder / fence / members read
  '+evalsha', '+eval', '+subscribe', '+unsubscribe', '+get', '+hget', '+hkeys', '+mget',
  // called inside the scripts; INFO only for the failover guard's two sections
  '+info|replication', '+info|server', '+time', '+set', '+exists', '+incr', '+incrby', '+zrange', '+zrangebyscore', '+zrem', '+zadd', '+zscore',
  '+pexpire', '+pttl', '+del', '+publish', '+hmget', '+hset', '+hdel',
].join(' ');
let server: RedisServer;
const clients: Redis[] = [];

const connect = (username: string, password: string): Redis => {
  // ioredis' ready check runs a bare INFO, which the rule does not allow.
  const c = new Redis({ ...server.endpoint, tls: server.tlsOptions, username, password, maxRetriesPerRequest: 1, lazyConnect: true, enableReadyCheck: false });
  c.on('error', () => undefined);
  clients.push(c);
  return c;
};

beforeAll(async () => {
  const certs = await makeCertificates();
  server = await new RedisServer({
    tls: certs,
    aclUsers: [`tenure on >${SECRET} resetchannels ${TENURE_ACL}`, `intruder on >intruder-secret resetchannels ${TENURE_ACL.replaceAll('tenure:', 'intruder:')} +del +set`],
  }).start();
});
afterAll(async () => {
  for (const c of clients) c.disconnect();
  await server?.stop();
});

it('RedisLock and RedisFencedResource work over TLS as an ACL user limited to tenure: keys and commands', async () => {
  const redis = connect('tenure', SECRET);
  await redis.connect();
  const lock = new RedisLock(redis, 'job', { ttlMs: 1000, restartGuardMs: 0 });
  const waiter = new RedisLock(redis, 'job', { ttlMs: 1000, restartGuardMs: 0 });
  const lease = await lock.acquire({ timeoutMs: 5000 });
  const next = waiter.acquire({ timeoutMs: 5000 }); // queues and subscribes to the release channel
  await new Promise((r) => setTimeout(r, 700)); // a renew (TTL/3) runs under the ACL too
  expect(lease.signal.aborted).toBe(false);
  await lease.release();
  const second = await next;
  expect(second.fence).toBeGreaterThan(lease.fence);
  const res = new RedisFencedResource(redis, 'tenure:{ledger}:fence');
  await res.write(second.fence, (w) => w.set('tenure:{ledger}:balance', 1).hset('tenure:{ledger}:meta', { by: 'job' }));
  expect(await res.highestFence()).toBe(second.fence);
  await second.release();
  await Promise.all([lock.close(), waiter.close()]);
  const election = new RedisElection(redis, 'leader', { ttlMs: 1000, restartGuardMs: 0 });
  const term = await election.campaign({ timeoutMs: 5000 });
  expect((await election.leader())?.fence).toBe(term.fence);
  await election.close();
  const m = new RedisMembership(redis, 'workers', { id: 'w1', ttlMs: 1000 });
  await m.join();
  expect((await m.members()).map((x) => x.id)).toEqual(['w1']);
  await m.leave();
  expect(await m.members()).toEqual([]);
});

it('the rule allows INFO only for the replication and server sections', async () => {
  const redis = connect('tenure', SECRET);
  await redis.connect();
  expect(await redis.info('replication')).toMatch(/master_replid:/);
  await expect(redis.info()).rejects.toThrow(/NOPERM/);
  await expect(redis.info('clients')).rejects.toThrow(/NOPERM/);
  await expect(redis.ping()).rejects.toThrow(/NOPERM/);
});

it('a user for another key pattern cannot touch the lock or its fence counter: PermissionDeniedError, no retry', async () => {
  const owner = connect('tenure', SECRET);
  await owner.connect();
  const lock = new RedisLock(owner, 'guarded', { ttlMs: 2000, restartGuardMs: 0 });
  const lease = await lock.acquire({ timeoutMs: 5000 });

  const intruder = connect('intruder', 'intruder-secret');
  await intruder.connect();
  await expect(intruder.del('tenure:lock:{guarded}')).rejects.toThrow(/NOPERM/);
  await expect(intruder.set('tenure:fence:{guarded}', '0')).rejects.toThrow(/NOPERM/);
  // Its own RedisLock on tenure's keys is refused by name, at once.
  const theirs = new RedisLock(intruder, 'guarded', { ttlMs: 2000, restartGuardMs: 0 });
  const err = await theirs.acquire({ timeoutMs: 5000 }).catch((e: unknown) => e);
  expect(err).toBeInstanceOf(PermissionDeniedError);
  expect((err as PermissionDeniedError).code).toBe('PERMISSION_DENIED');
  await expect(theirs.tryAcquire()).rejects.toBeInstanceOf(PermissionDeniedError);
  await expect(new RedisFencedResource(intruder, 'tenure:{ledger}:fence').write(1n, (w) => w.set('tenure:{ledger}:x', 1))).rejects.toBeInstanceOf(PermissionDeniedError);
  expect(lease.signal.aborted).toBe(false);
  expect(await owner.get('tenure:lock:{guarded}')).not.toBeNull();
  await lease.release();
  await Promise.all([lock.close(), theirs.close()]);
});

it('a wrong password is a PermissionDeniedError, and no error or log line carries the password', async () => {
  const lines: string[] = [];
  const logger = pino({ level: 'debug' }, new Writable({ write: (chunk: Buffer, _e, cb) => (lines.push(chunk.toString()), cb()) }));
  const wrong = 'not-the-Pa55-word';
  const redis = connect('tenure', wrong);
  await redis.connect().catch(() => undefined);
  const lock = new RedisLock(redis, 'job', { ttlMs: 1000, logger });
  const err = await lock.acquire({ timeoutMs: 5000 }).catch((e: unknown) => e);
  expect(err).toBeInstanceOf(PermissionDeniedError);
  const seen = [String(err), (err as Error).stack ?? '', JSON.stringify(err), String((err as Error).cause), ...lines].join('\n');
  expect(seen).not.toContain(wrong);
  expect(seen).not.toContain(SECRET);
  await lock.close();
});
