import { EtcdServer } from '../../src/testing/index.js';
import { cliSuite } from './suite.js';

cliSuite('etcd', async () => {
  const s = await new EtcdServer().start();
  return { endpoint: () => `127.0.0.1:${s.clientPort}`, via: (port) => `127.0.0.1:${port}`, port: () => s.clientPort, stop: () => s.stop() };
});
