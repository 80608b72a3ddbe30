import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/index.js';
import {
  EtcdCluster,
  EtcdServer,
  FaultProxy,
  PostgresServer,
  RedisServer,
  spawnWorker,
  ZooKeeperEnsemble,
  ZooKeeperServer,
} from '../../src/testing/index.js';

function field(fn: () => unknown): string {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(ConfigError);
    expect((e as ConfigError).code).toBe('CONFIG_INVALID');
    return (e as ConfigError).field;
  }
  throw new Error('expected a ConfigError');
}

describe('every public constructor of the kit validates and names the field', () => {
  it.each([
    ['RedisServer port', () => new RedisServer({ port: 'x' as unknown as number }), 'port'],
    ['RedisServer options', () => new RedisServer(7 as unknown as object), 'options'],
    ['PostgresServer port', () => new PostgresServer({ port: 70_000 }), 'port'],
    ['ZooKeeperServer tickTime', () => new ZooKeeperServer({ tickTime: 0 }), 'tickTime'],
    ['ZooKeeperServer maxHeapMb', () => new ZooKeeperServer({ maxHeapMb: 16 }), 'maxHeapMb'],
    ['ZooKeeperServer session bounds', () => new ZooKeeperServer({ minSessionTimeout: 4000, maxSessionTimeout: 1000 }), 'maxSessionTimeout'],
    ['ZooKeeperEnsemble size', () => new ZooKeeperEnsemble({ size: 0 }), 'size'],
    ['ZooKeeperEnsemble member options', () => new ZooKeeperEnsemble({ tickTime: -1 }), 'tickTime'],
    ['EtcdServer electionMs', () => new EtcdServer({ heartbeatMs: 100, electionMs: 200 }), 'electionMs'],
    ['EtcdCluster size', () => new EtcdCluster({ size: 1.5 }), 'size'],
    ['FaultProxy target', () => new FaultProxy({} as never), 'target.port'],
    ['FaultProxy port', () => new FaultProxy({ target: { port: 1 }, port: -1 }), 'port'],
    ['FaultProxy delay', () => new FaultProxy({ target: { port: 1 } }).delay(-5), 'ms'],
  ])('%s', (_name, fn, expected) => {
    expect(field(fn)).toBe(expected);
  });

  it('spawnWorker rejects a missing file and non-string args', async () => {
    await expect(spawnWorker('')).rejects.toMatchObject({ field: 'file' });
    await expect(spawnWorker('x.js', [1 as unknown as string])).rejects.toMatchObject({ field: 'args' });
  });
});
