import { PostgresServer } from '../../src/testing/index.js';
import { failoverSuite } from './failover.js';

failoverSuite('postgres', async () => {
  const s = await new PostgresServer().start();
  return { endpoint: () => `127.0.0.1:${s.port}`, port: () => s.port, stop: () => s.stop() };
});
