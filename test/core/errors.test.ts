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
  StoreUnavailableError,
  TenureError,
} from '../../src/index.js';
import { expectNoSecret } from '../helpers/secrets.js';
import { optionalLogger } from '../../src/core/options.js';
import { pino } from 'pino';
import { Writable } from 'node:stream';

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

describe('secrets never survive in a tenure error', () => {
  it('a cause chain loses URL passwords, secret-named fields and driver command arguments, in place', () => {
    const driver = Object.assign(new Error('connect to postgres://app:hunter2@db:5432/x failed'), {
      command: { name: 'hello', args: ['3', 'AUTH', 'app', 'hunter2'] },
      options: { host: 'db', password: 'hunter2', authInfo: [{ scheme: 'digest', auth: 'app:hunter2' }] },
    });
    const inner = new AggregateError([Object.assign(new Error('x'), { connectionString: 'redis://:hunter2@h' })], 'all failed');
    (driver as { cause?: unknown }).cause = inner;
    (inner as { cause?: unknown }).cause = driver; // a cycle ends the walk, not the process
    const err = new StoreUnavailableError('postgres', 'db:5432', 'failed: postgres://app:hunter2@db:5432/x', { cause: driver });
    expect(err.cause).toBe(driver);
    expect(driver.command).toEqual({ name: 'hello', args: '[redacted]' });
    expect(driver.options.host).toBe('db');
    expectNoSecret(err, 'hunter2');
    expect(err.message).toContain('postgres://app:[redacted]@db:5432/x');
  });
});

describe('secrets never reach a log line', () => {
  it('the logger tenure wraps cleans the errors a line carries (driver errors are logged before they are wrapped)', () => {
    const lines: string[] = [];
    const logger = pino({ level: 'debug' }, new Writable({ write: (c: Buffer, _e, cb) => (lines.push(c.toString()), cb()) }));
    const log = optionalLogger(logger, { component: 'test' }).child({ id: 'x' });
    const driver = Object.assign(new Error('handshake to rediss://app:hunter2@h failed'), { command: { name: 'hello', args: ['3', 'AUTH', 'app', 'hunter2'] } });
    log.debug({ err: driver }, 'retrying');
    log.warn(driver);
    expect(lines).toHaveLength(2);
    expect(lines.join('\n')).toContain('retrying');
    expect(lines.join('\n')).not.toContain('hunter2');
  });
});
