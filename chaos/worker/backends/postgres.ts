import pg from 'pg';
import { PgElection, PgMembership } from '../../../src/recipes/postgres/index.js';
import type { CandidateKind } from '../kind.js';

/**
 * Postgres: a PgElection with a server-enforced lease (`ttlMs`: idle_session_timeout and a
 * heartbeat), so a frozen or partitioned holder loses its lock after the TTL, like on the others.
 */
export const postgresCandidate: CandidateKind = (ctx) => {
  if (ctx.store.backend !== 'postgres') throw new Error('postgres candidate needs a postgres endpoint');
  // Each held shard pins a connection (the shard kind): room for all of them, the membership's and reads.
  const pool = new pg.Pool({ host: ctx.store.host, port: ctx.store.port, user: 'postgres', database: 'postgres', max: 4 + (ctx.shards ?? 0), connectionTimeoutMillis: 5000 });
  pool.on('error', () => undefined); // idle clients see restarts and cuts; the lease's signal says what they mean
  const election = new PgElection(pool, ctx.name, { id: ctx.id, ttlMs: ctx.ttlMs, safetyMarginMs: ctx.marginMs });
  const timing = { ttlMs: ctx.ttlMs, safetyMarginMs: ctx.marginMs };
  return {
    open: async () => election,
    shards: async () => ({ membership: new PgMembership(pool, `${ctx.name}/members`, { id: ctx.id, ...timing }), candidate: (shard) => new PgElection(pool, `${ctx.name}/${shard}`, { id: ctx.id, ...timing }) }),
    async close() {
      await election.close().catch(() => undefined);
      await pool.end().catch(() => undefined);
    },
  };
};
