import { afterAll, beforeAll, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import pg from 'pg';
import { RedisLock } from '../../src/recipes/redis/index.js';
import { EtcdSession, createEtcdClient } from '../../src/recipes/etcd/index.js';
import { withXactLock } from '../../src/recipes/postgres/index.js';
import { TlsError, type TlsProblem } from '../../src/index.js';
import { EtcdServer, PostgresServer, RedisServer, makeCertificates, type TestCertificates } from '../../src/testing/index.js';
import { postgresUser } from '../../src/testing/postgres.js';

/**
 * Certificate problems are misconfigurations, not outages: a TlsError (TLS_FAILED, never
 * retryable) that names the problem, on every backend with TLS (node-zookeeper-client has none),
 * instead of a retryable StoreUnavailableError ("14 UNAVAILABLE: No connection established",
 * "max retries per request") or a bare TenureError. Servers: the kit's, requiring client
 * certificates; `other` is a stranger CA, `old` signed an expired server certificate.
 */
let certs: TestCertificates, other: TestCertificates, old: TestCertificates;
let redis: RedisServer, redisOld: RedisServer, etcd: EtcdServer, etcdOld: EtcdServer, postgres: PostgresServer;
beforeAll(async () => {
  certs = await makeCertificates(postgresUser());
  other = await makeCertificates();
  old = await makeCertificates(postgresUser(), { expiredServer: true });
  [redis, redisOld, etcd, etcdOld] = await Promise.all([new RedisServer({ tls: certs }).start(), new RedisServer({ tls: old }).start(), new EtcdServer({ tls: certs }).start(), new EtcdServer({ tls: old }).start()]);
  postgres = await new PostgresServer({ ssl: certs, hba: ['hostssl all app 127.0.0.1/32 trust clientcert=verify-ca'] }).start();
  const admin = new pg.Client(postgres.connectionConfig);
  await admin.connect();
  await admin.query('CREATE ROLE app LOGIN');
  await admin.end();
});
afterAll(() => Promise.all([redis, redisOld, etcd, etcdOld, postgres].map((s) => s?.stop())));

/** `err` is a TlsError for `problem` whose message says it in words, and it came in time. */
function expectTls(err: unknown, store: string, problem: TlsProblem, words: RegExp, ms: number): void {
  expect(err, String(err)).toBeInstanceOf(TlsError);
  const e = err as TlsError;
  expect({ code: e.code, retryable: e.retryable, store: e.store, problem: e.problem }).toEqual({ code: 'TLS_FAILED', retryable: false, store, problem });
  expect(e.message).toMatch(words);
  expect(ms).toBeLessThan(5000);
}

const WORDS: Record<string, [TlsProblem, RegExp]> = {
  'unknown-ca': ['unknown-ca', /not signed by a CA this client trusts/],
  expired: ['expired', /expired/],
  hostname: ['hostname-mismatch', /not for the name connected to.*wrong\.invalid/],
  'no-client-cert': ['client-certificate', /refused this client's certificate, or wanted one/],
  'rogue-client-cert': ['client-certificate', /refused this client's certificate/],
  plaintext: ['plaintext', /does not speak TLS/],
};

it('Redis: a certificate problem or plaintext to the TLS port is a TlsError naming it, not "max retries per request"', async () => {
  const cases: [string, RedisServer, Record<string, unknown> | undefined][] = [
    ['unknown-ca', redis, { ca: other.ca, cert: certs.clientCert, key: certs.clientKey, servername: 'localhost' }],
    ['expired', redisOld, { ca: old.ca, cert: old.clientCert, key: old.clientKey, servername: 'localhost' }],
    ['hostname', redis, { ca: certs.ca, cert: certs.clientCert, key: certs.clientKey, servername: 'wrong.invalid' }],
    ['no-client-cert', redis, { ca: certs.ca, servername: 'localhost' }],
    ['rogue-client-cert', redis, { ca: certs.ca, cert: other.clientCert, key: other.clientKey, servername: 'localhost' }],
    ['plaintext', redis, undefined],
  ];
  // ioredis' defaults (20 retries per request, reconnecting for ever) end the same way.
  const patient = new Redis({ ...redis.endpoint, tls: { ca: other.ca, servername: 'localhost' }, lazyConnect: true });
  patient.on('error', () => undefined);
  const t0 = performance.now();
  const err = await new RedisLock(patient, 'job', { callTimeoutMs: 1000 }).tryAcquire().catch((e: unknown) => e);
  expectTls(err, 'redis', 'unknown-ca', /not signed by a CA/, performance.now() - t0);
  patient.disconnect();
  for (const [label, s, tls] of cases) {
    const c = new Redis({ ...s.endpoint, ...(tls ? { tls } : {}), maxRetriesPerRequest: 1, lazyConnect: true });
    c.on('error', () => undefined);
    const t0 = performance.now();
    const err = await new RedisLock(c, 'job').tryAcquire().catch((e: unknown) => e);
    expectTls(err, 'redis', WORDS[label]![0], WORDS[label]![1], performance.now() - t0);
    c.disconnect();
  }
});

it('etcd: a certificate problem or http:// to the TLS port is a TlsError naming it, not "14 UNAVAILABLE: No connection established"', async () => {
  const cred = (t: TestCertificates, ca = t.ca, client = t) => ({ rootCertificate: Buffer.from(ca), certChain: Buffer.from(client.clientCert), privateKey: Buffer.from(client.clientKey) });
  const cases: [string, string[], Record<string, unknown>][] = [
    ['unknown-ca', etcd.endpoints, { credentials: cred(certs, other.ca) }],
    ['expired', etcdOld.endpoints, { credentials: cred(old) }],
    ['hostname', etcd.endpoints, { credentials: cred(certs), grpcOptions: { 'grpc.ssl_target_name_override': 'wrong.invalid' } }],
    ['no-client-cert', etcd.endpoints, { credentials: { rootCertificate: Buffer.from(certs.ca) } }],
    ['rogue-client-cert', etcd.endpoints, { credentials: cred(certs, certs.ca, other) }],
    ['plaintext', etcd.endpoints.map((h) => h.replace('https:', 'http:')), {}],
  ];
  for (const [label, hosts, etcd3] of cases) {
    const client = await createEtcdClient({ hosts, etcd3 });
    const t0 = performance.now();
    const err = await EtcdSession.create({ client, ttlMs: 2000 }).catch((e: unknown) => e);
    expectTls(err, 'etcd', WORDS[label]![0], WORDS[label]![1], performance.now() - t0);
    client.close();
  }
});

it('Postgres: a certificate problem or a connection without TLS is a TlsError naming it, not a bare TenureError', async () => {
  const base = { ...postgres.connectionConfig, user: 'app' };
  const cases: [string, Record<string, unknown>][] = [
    ['unknown-ca', { ssl: { ca: other.ca, cert: certs.clientCert, key: certs.clientKey, servername: 'localhost' } }],
    ['hostname', { ssl: { ca: certs.ca, cert: certs.clientCert, key: certs.clientKey, servername: 'wrong.invalid' } }],
    ['no-client-cert', { ssl: { ca: certs.ca, servername: 'localhost' } }],
    ['rogue-client-cert', { ssl: { ca: certs.ca, cert: other.clientCert, key: other.clientKey, servername: 'localhost' } }],
    ['plaintext', { ssl: false }],
  ];
  // (An expired server certificate fails the same client-side check on every backend: Redis and etcd show it.)
  for (const [label, extra] of cases) {
    const pool = new pg.Pool({ ...base, ...extra, max: 1 });
    pool.on('error', () => undefined);
    const t0 = performance.now();
    const err = await withXactLock(pool, 'job', () => undefined).catch((e: unknown) => e);
    expectTls(err, 'postgres', WORDS[label]![0], WORDS[label]![1], performance.now() - t0);
    await pool.end();
  }
});
