import { afterAll, afterEach, beforeAll } from 'vitest';
import type pg from 'pg';
import { makePool } from '../postgres/helpers.js';
import { PostgresServer } from '../../src/testing/index.js';
import { PgElection, advisoryKey } from '../../src/recipes/postgres/index.js';
import { candidateContract, type CandidateBackend } from './candidate.js';
import { managerContract } from './manager.js';

let server: PostgresServer;
let pool: pg.Pool;
const pools: pg.Pool[] = [];

beforeAll(async () => {
  server = await new PostgresServer().start();
  pool = makePool({ ...server.connectionConfig, max: 20 });
});
afterEach(async () => {
  await Promise.all(pools.splice(0).map((p) => p.end()));
});
afterAll(async () => {
  await pool?.end();
  await server?.stop();
});

/** Backend pids that hold (or, unless `heldOnly`, wait for) the advisory lock of `name`. */
async function lockers(name: string, heldOnly = false): Promise<number[]> {
  const k = advisoryKey(name);
  const r = await pool.query(`SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 2 AND classid = $1::bigint::oid AND objid = $2::bigint::oid${heldOnly ? ' AND granted' : ''}`, [k.namespace >>> 0, k.key >>> 0]);
  return r.rows.map((row: { pid: number }) => row.pid);
}

const backend = (): CandidateBackend => ({
  ttlMs: 3000,
  async make(name, id, clock) {
    return new PgElection(pool, name, { id, ttlMs: 3000, backoff: { initialMs: 10, maxMs: 100 }, observeIntervalMs: 100, ...(clock ? { clock } : {}) });
  },
  // Only the holder's backend: a waiter's, ended a moment later, may by then hold the next term
  // (the observe case then saw that term end before it could read it, and waited for it in vain).
  async loseFromOutside(_candidate, term) {
    for (const pid of await lockers(term.name, true)) await pool.query('SELECT pg_terminate_backend($1)', [pid]);
  },
  async participants(name) {
    return (await lockers(name)).length;
  },
  async cleanup() {},
  port: () => server.port,
  async makeThrough(name, id, port) {
    const p = makePool({ ...server.connectionConfig, port, max: 5 });
    pools.push(p);
    return new PgElection(p, name, { id, ttlMs: 3000, backoff: { initialMs: 10, maxMs: 100 }, observeIntervalMs: 100 });
  },
});

candidateContract('Postgres PgElection', backend);
managerContract('Postgres PgElection', backend);
