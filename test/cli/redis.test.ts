import { RedisServer } from '../../src/testing/index.js';
import { cliSuite } from './suite.js';

cliSuite('redis', async () => {
  const s = await new RedisServer().start();
  return { endpoint: () => `127.0.0.1:${s.port}`, via: (port) => `127.0.0.1:${port}`, port: () => s.port, stop: () => s.stop() };
}, { full: false });
