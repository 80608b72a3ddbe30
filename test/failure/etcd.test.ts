import { EtcdServer } from '../../src/testing/index.js';
import { failureMatrix } from './matrix.js';

failureMatrix(
  'etcd',
  async () => {
    const s = await new EtcdServer().start();
    return { endpoint: () => `127.0.0.1:${s.clientPort}`, port: () => s.clientPort, pause: () => s.pause(), resume: () => s.resume(), kill: () => s.kill(), stop: () => s.stop() };
  },
  { down: ['create'], blackhole: ['create', 'acquire', 'tryAcquire', 'campaign'], afterFault: [] },
);
