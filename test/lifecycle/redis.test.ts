import { RedisServer } from '../../src/testing/index.js';
import { failoverSuite } from './failover.js';

failoverSuite('redis', async () => {
  const s = await new RedisServer().start();
  return { endpoint: () => `127.0.0.1:${s.port}`, port: () => s.port, stop: () => s.stop() };
});
