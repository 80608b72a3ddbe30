import { describe, expect, it } from 'vitest';
import { addSecret, childEnv, endpointSecrets, redact } from '../../src/cli/secrets.js';

/** The CLI's masking and its child environment, case by case (end to end: secured.test.ts). */
describe('CLI secrets', () => {
  it.each([
    ["'postgres://app:pw@db:5432/x,' is not", "'postgres://app:[redacted]@db:5432/x,' is not"],
    ['redis://:p@ss@h:1 refused', 'redis://:[redacted]@h:1 refused'],
    ["'app:pw@db:5432' is not host:port", "'app:[redacted]@db:5432' is not host:port"],
    ['postgres://db/x?sslmode=require&password=pw&a=1', 'postgres://db/x?sslmode=require&password=[redacted]&a=1'],
    ['etcd at http://127.0.0.1:2379: 14 UNAVAILABLE', 'etcd at http://127.0.0.1:2379: 14 UNAVAILABLE'],
    ['zookeeper at 127.0.0.1:2181,127.0.0.1:2182/chroot', 'zookeeper at 127.0.0.1:2181,127.0.0.1:2182/chroot'],
  ])('redact(%j) masks the password and keeps the rest', (text, masked) => {
    expect(redact(text)).toBe(masked);
  });

  it('a known secret is masked wherever it appears, URL-encoded or not', () => {
    addSecret('s3cr%40t');
    expect(redact('auth failed: s3cr@t / s3cr%40t')).toBe('auth failed: [redacted] / [redacted]');
  });

  it('endpointSecrets finds the password of a URL (up to its last @), a bare user:password@ and password=', () => {
    expect(endpointSecrets('redis://:p@ss@h:1')).toEqual(['p@ss']);
    expect(endpointSecrets('app:pw@db:5432')).toEqual(['pw']);
    expect(endpointSecrets('postgres://app@db/x?password=pw')).toEqual(['pw']);
    expect(endpointSecrets('redis://user@h:1')).toEqual([]);
    expect(endpointSecrets('127.0.0.1:2181/chroot')).toEqual([]);
  });

  it('childEnv withholds TENURE_PASSWORD, PGPASSWORD on postgres and a TENURE_ENDPOINTS holding a password, unless passEnv names them', () => {
    const env = { PATH: '/bin', TENURE_PASSWORD: 'a', PGPASSWORD: 'b', TENURE_ENDPOINTS: 'postgres://u:c@db/x' };
    expect(childEnv({ backend: 'postgres' }, env)).toEqual({ PATH: '/bin' });
    expect(childEnv({ backend: 'etcd' }, env)).toEqual({ PATH: '/bin', PGPASSWORD: 'b' }); // not tenure's on etcd
    expect(childEnv({ backend: 'postgres', passEnv: ['PGPASSWORD'] }, env)).toEqual({ PATH: '/bin', PGPASSWORD: 'b' });
    expect(childEnv({ backend: 'postgres', passEnv: ['all'] }, env)).toEqual(env);
    expect(childEnv({ backend: 'redis' }, { TENURE_ENDPOINTS: '127.0.0.1:6379' })).toEqual({ TENURE_ENDPOINTS: '127.0.0.1:6379' });
  });
});
