/** Start-up time of every server and cluster of tenure/testing, each started alone. */
import { performance } from 'node:perf_hooks';
import { EtcdCluster, EtcdServer, PostgresServer, RedisServer, ZooKeeperEnsemble, ZooKeeperServer } from '../src/testing/index.js';
import { percentile, type BenchCase, type BenchRow } from './harness.js';

const kinds: [string, () => { start(): Promise<unknown>; stop(): Promise<void> }][] = [
  ['RedisServer', () => new RedisServer()],
  ['EtcdServer', () => new EtcdServer()],
  ['EtcdCluster (3)', () => new EtcdCluster()],
  ['ZooKeeperServer', () => new ZooKeeperServer()],
  ['ZooKeeperEnsemble (3)', () => new ZooKeeperEnsemble()],
  ['PostgresServer', () => new PostgresServer()],
];

export const cases: BenchCase[] = [
  {
    group: 'kit start-up',
    async run() {
      const rows: BenchRow[] = [];
      for (const [name, make] of kinds) {
        const times: number[] = [];
        for (let i = 0; i < 5; i++) {
          const s = make();
          const t = performance.now();
          await s.start();
          times.push(performance.now() - t);
          await s.stop();
        }
        rows.push({
          group: 'kit start-up',
          scenario: 'start() until it answers (5 runs)',
          impl: name,
          p50Ms: percentile(times, 50),
          notes: `min ${Math.min(...times).toFixed(0)} ms, max ${Math.max(...times).toFixed(0)} ms${name === 'PostgresServer' ? ' (max: first run, includes initdb)' : ''}`,
        });
      }
      return rows;
    },
  },
];
