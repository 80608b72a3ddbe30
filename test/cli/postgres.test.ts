import { PostgresServer } from '../../src/testing/index.js';
import { cliSuite } from './suite.js';

cliSuite('postgres', async () => {
  const s = await new PostgresServer().start();
  return { endpoint: () => s.connectionString, via: (port) => `postgres://postgres@127.0.0.1:${port}/postgres`, port: () => s.port, stop: () => s.stop() };
}, { full: false });
