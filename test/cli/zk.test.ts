import { ZooKeeperServer } from '../../src/testing/index.js';
import { cliSuite } from './suite.js';

cliSuite('zk', async () => {
  const s = await new ZooKeeperServer().start();
  return { endpoint: () => s.connectionString, via: (port) => `127.0.0.1:${port}`, port: () => s.port, stop: () => s.stop() };
});
