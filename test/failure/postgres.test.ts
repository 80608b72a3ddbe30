import { PostgresServer } from '../../src/testing/index.js';
import { failureMatrix } from './matrix.js';

failureMatrix(
  'postgres',
  async () => {
    const s = await new PostgresServer().start();
    return { endpoint: () => `127.0.0.1:${s.port}`, port: () => s.port, pause: () => s.pause(), resume: () => s.resume(), kill: () => s.kill(), stop: () => s.stop() };
  },
  { down: ['create', 'acquire', 'tryAcquire', 'campaign', 'xact', 'fencedWrite'], blackhole: ['create', 'acquire', 'tryAcquire', 'campaign', 'xact', 'fencedWrite'], afterFault: ['fencedWrite'] },
);
