import { ZooKeeperServer } from '../../src/testing/index.js';
import { failoverSuite } from './failover.js';

failoverSuite('zk', async () => {
  const s = await new ZooKeeperServer().start();
  return { endpoint: () => `127.0.0.1:${s.port}`, port: () => s.port, stop: () => s.stop() };
});
