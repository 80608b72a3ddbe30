import { EtcdServer } from '../../src/testing/index.js';
import { failoverSuite } from './failover.js';

failoverSuite('etcd', async () => {
  const s = await new EtcdServer().start();
  return { endpoint: () => `127.0.0.1:${s.clientPort}`, port: () => s.clientPort, stop: () => s.stop() };
});
