/**
 * A leader-only job in a Nest application: run two or more copies. Only the leader appends to the
 * ledger (a Redis list behind a RedisFencedResource), each entry stamped with its term's fence.
 * SIGKILL the leader and another copy takes over once its lease expires (the TTL), with a higher
 * fence; SIGTERM it and Nest's shutdown hooks end the term — signal, drain, release — so another
 * copy leads at once.
 *
 *   node --import tsx examples/nestjs/main.ts etcd http://127.0.0.1:2379 redis://127.0.0.1:6379 [name] [ttlMs]
 *   node --import tsx examples/nestjs/main.ts redis redis://127.0.0.1:6379 redis://127.0.0.1:6379 [name] [ttlMs]
 *
 * It prints one JSON line per event on stdout, stamped with the monotonic clock (the test reads them).
 */
import 'reflect-metadata';
import { NestFactory } from '@nestjs/core';
import { AppModule, type LedgerConfig } from './app.module.js';

const [backend = 'etcd', store = 'http://127.0.0.1:2379', ledger = 'redis://127.0.0.1:6379', name = 'ledger', ttl = '2000'] = process.argv.slice(2);
if (backend !== 'etcd' && backend !== 'redis') throw new Error(`backend: etcd or redis, not ${backend}`);
const id = `${name}-${process.pid}`;
const say = (event: string, data: Record<string, unknown> = {}): void => console.log(JSON.stringify({ event, id, t: String(process.hrtime.bigint()), ...data }));

const config: LedgerConfig = { backend, store, ledger, name, id, ttlMs: Number(ttl), say };
// Nest logs errors only, to stderr: stdout carries the JSON lines.
const app = await NestFactory.createApplicationContext(AppModule.forRoot(config), { logger: ['error'] });
// SIGTERM/SIGINT run Nest's shutdown hooks (the term ends and drains, the lease is released), then exit 0.
app.enableShutdownHooks(['SIGTERM', 'SIGINT'], { useProcessExit: true });
say('started');
