import { describe, expect, it } from 'vitest';
import {
  AcquireTimeoutError,
  ClosedError,
  ConfigError,
  LeaseLostError,
  NoTermError,
  NotLeaderError,
  ServerStartError,
  SessionExpiredError,
  StaleFenceError,
  TenureError,
} from '../../src/index.js';

describe('error hierarchy', () => {
  const cases: [TenureError, string, string][] = [
    [new ConfigError('ttlSeconds', 'must be greater than 0'), 'ConfigError', 'CONFIG_INVALID'],
    [new LeaseLostError('deadline'), 'LeaseLostError', 'LEASE_LOST'],
    [new StaleFenceError(1n, 2n, 'ledger'), 'StaleFenceError', 'STALE_FENCE'],
    [new NotLeaderError(), 'NotLeaderError', 'NOT_LEADER'],
    [new NoTermError(), 'NoTermError', 'NO_TERM'],
    [new SessionExpiredError(), 'SessionExpiredError', 'SESSION_EXPIRED'],
    [new AcquireTimeoutError(100), 'AcquireTimeoutError', 'ACQUIRE_TIMEOUT'],
    [new ClosedError('mutex'), 'ClosedError', 'CLOSED'],
    [new ServerStartError('etcd did not start', 'log'), 'ServerStartError', 'SERVER_START_FAILED'],
  ];

  it.each(cases)('every error is a TenureError with a name and a stable code (%#)', (err, name, code) => {
    expect(err).toBeInstanceOf(TenureError);
    expect(err).toBeInstanceOf(Error);
    expect(err.name).toBe(name);
    expect(err.code).toBe(code);
    expect(typeof err.retryable).toBe('boolean');
  });

  it('a config error names the field first', () => {
    const e = new ConfigError('safetyMarginMs', 'must be less than the TTL');
    expect(e.field).toBe('safetyMarginMs');
    expect(e.message).toBe('safetyMarginMs: must be less than the TTL');
    expect(e.retryable).toBe(false);
  });

  it('a stale-fence error carries both fences and the resource', () => {
    const e = new StaleFenceError(9n, 10n, 'orders');
    expect(e).toMatchObject({ fence: 9n, highest: 10n, resource: 'orders' });
    expect(e.message).toContain('9');
    expect(e.message).toContain('orders');
  });

  it('keeps the cause', () => {
    const cause = new Error('socket closed');
    expect(new LeaseLostError('connection-lost', undefined, { cause }).cause).toBe(cause);
  });

  it('a lost lease is retryable unless the holder ended it', () => {
    expect(new LeaseLostError('deadline').retryable).toBe(true);
    expect(new LeaseLostError('released').retryable).toBe(false);
  });
});
