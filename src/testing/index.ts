/**
 * tenure/testing: real servers on demand for tests, like Curator's curator-test. Every server is
 * a child process on free loopback ports with its own temp data dir, ready when it answers, and
 * removed on stop and on process exit.
 */
export type { LocalServer, FaultTarget, RestartOptions } from './server.js';
export type { LocalCluster } from './cluster.js';
export { ZooKeeperServer, ZooKeeperEnsemble, fourLetterWord, type ZooKeeperServerOptions, type ZooKeeperEnsembleOptions } from './zookeeper.js';
export { EtcdServer, EtcdCluster, type EtcdServerOptions, type EtcdClusterOptions } from './etcd.js';
export { RedisServer, type RedisServerOptions } from './redis.js';
export { RedisCluster, type RedisClusterOptions } from './redis-cluster.js';
export { PgBouncerServer, type PgBouncerServerOptions } from './pgbouncer.js';
export { makeCertificates, type CertificateOptions, type TestCertificates } from './tls.js';
export { PostgresServer, type PostgresServerOptions } from './postgres.js';
export { FaultProxy, type FaultProxyOptions } from './fault-proxy.js';
export { spawnWorker, workerReport, onParentMessage, WorkerHandle, type WorkerEvent, type SpawnWorkerOptions } from './worker.js';
export { reapOrphans, type ReapReport } from './registry.js';
export { freePort } from './net.js';
export type { ExitInfo } from './process.js';
export * from './history/index.js';
