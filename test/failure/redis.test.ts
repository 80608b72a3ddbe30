import { RedisServer } from '../../src/testing/index.js';
import { failureMatrix } from './matrix.js';

failureMatrix(
  'redis',
  async () => {
    const s = await new RedisServer().start();
    return { endpoint: () => `127.0.0.1:${s.port}`, port: () => s.port, pause: () => s.pause(), resume: () => s.resume(), kill: () => s.kill(), stop: () => s.stop() };
  },
  { down: ['create', 'acquire', 'tryAcquire', 'campaign', 'fencedWrite'], blackhole: ['create', 'acquire', 'tryAcquire', 'campaign', 'fencedWrite'], afterFault: ['fencedWrite'] },
);
