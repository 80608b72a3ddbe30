import { ZooKeeperServer } from '../../src/testing/index.js';
import { failureMatrix } from './matrix.js';

failureMatrix(
  'zk',
  async () => {
    const s = await new ZooKeeperServer().start();
    return { endpoint: () => `127.0.0.1:${s.port}`, port: () => s.port, pause: () => s.pause(), resume: () => s.resume(), kill: () => s.kill(), stop: () => s.stop() };
  },
  { down: ['create'], blackhole: ['create', 'acquire', 'tryAcquire', 'campaign'], afterFault: [] },
);
