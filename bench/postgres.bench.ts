/**
 * Postgres advisory locks: tenure's withXactLock vs the raw `pg_advisory_xact_lock` baseline
 * (the same two round trips: `BEGIN; SELECT pg_advisory_xact_lock(…)`, then `COMMIT`) and vs the
 * same with the fence's `nextval` (withXactLock's exact SQL: the floor of a fenced lock), for one
 * client and 10 contenders; and PgSessionLock vs a raw pinned `pg_advisory_lock`/`unlock`.
 * Implementations are interleaved over three rounds; each row is the median round, with the spread.
 */
import pg from 'pg';
import { PgElection, PgSessionLock, advisoryKey, withXactLock } from '../src/recipes/postgres/index.js';
import { PostgresServer } from '../src/testing/index.js';
import { tenureTables } from '../src/recipes/postgres/schema.js';
import { cpuNote, interleaved, notes, spread, timeLoop, type BenchCase, type BenchRow } from './harness.js';
import { contend, contentionRow, handoff, type Acquire } from './contention.js';

type Impl = { impl: string; acquire: (pool: pg.Pool, name: string) => Acquire };

/** Holds the lock until the returned release runs (so contention and hand-off can be measured). */
function xactHolder(run: (pool: pg.Pool, name: string, body: () => Promise<void>) => Promise<unknown>): (pool: pg.Pool, name: string) => Acquire {
  return (pool, name) => () =>
    new Promise((granted, failed) => {
      run(pool, name, () => new Promise<void>((done) => granted(async () => done()))).catch(failed);
    });
}

const xactImpls: Impl[] = [
  { impl: 'tenure withXactLock', acquire: xactHolder((pool, name, body) => withXactLock(pool, name, body)) },
  {
    impl: 'raw pg_advisory_xact_lock',
    acquire: xactHolder(async (pool, name, body) => {
      const k = advisoryKey(name);
      const c = await pool.connect();
      try {
        await c.query(`BEGIN; SELECT pg_advisory_xact_lock(${k.namespace}, ${k.key})`);
        await body();
        await c.query('COMMIT');
      } finally {
        c.release();
      }
    }),
  },
  {
    // The same statements as tenure's withXactLock, fence included, with no client work around
    // them: what is left between this row and tenure's is tenure's JavaScript per cycle. It is also
    // the floor of any fenced xact lock: the row above has no fence, and no value cheaper than
    // this nextval is strictly increasing across holders, names and a server restart (the
    // candidates and why each fails: bench/RESULTS.md, "the fence's floor").
    impl: 'raw pg_advisory_xact_lock + nextval (the fence)',
    acquire: xactHolder(async (pool, name, body) => {
      const k = advisoryKey(name);
      const c = await pool.connect();
      try {
        await c.query(`BEGIN; SELECT pg_advisory_xact_lock(${k.namespace}, ${k.key}), ${tenureTables(undefined).nextval}::text AS fence`);
        await body();
        await c.query('COMMIT');
      } finally {
        c.release();
      }
    }),
  },
];

const sessionImpls: Impl[] = [
  {
    impl: 'tenure PgSessionLock',
    acquire: (pool, name) => {
      const lock = new PgSessionLock(pool, name);
      return async () => {
        const lease = await lock.acquire();
        return () => lease.release();
      };
    },
  },
  {
    impl: 'raw pg_advisory_lock (pinned client)',
    acquire: (pool, name) => async () => {
      const k = advisoryKey(name);
      const c = await pool.connect();
      await c.query(`SELECT pg_advisory_lock(${k.namespace}, ${k.key})`);
      return async () => {
        await c.query(`SELECT pg_advisory_unlock(${k.namespace}, ${k.key})`);
        c.release();
      };
    },
  },
];

/** A PgElection per participant: campaign → resign, waiting in the server's queue or polling. */
const election =
  (waitInQueue: boolean) =>
  (pool: pg.Pool, name: string): Acquire => {
    const e = new PgElection(pool, name, { waitInQueue });
    return async () => {
      await e.campaign();
      return () => e.resign();
    };
  };
const electionImpls: Impl[] = [
  { impl: 'tenure PgElection (waits in the lock queue)', acquire: election(true) },
  { impl: 'tenure PgElection (waitInQueue: false, polls)', acquire: election(false) },
];

const groups = [
  ['postgres xact lock', xactImpls],
  ['postgres session lock', sessionImpls],
  ['postgres election', electionImpls],
] as const;

async function run({ durationMs }: { durationMs: number }): Promise<BenchRow[]> {
  const server = await new PostgresServer().start();
  const pool = new pg.Pool({ ...server.connectionConfig, max: 12 });
  pool.on('error', () => undefined);
  const rows: BenchRow[] = [];
  try {
    await withXactLock(pool, 'warm-up', () => undefined); // creates the schema
    for (const [group, impls] of groups) {
      const names = impls.map((i) => i.impl);
      const byName = new Map(impls.map((i) => [i.impl, i.acquire]));
      const solo = await interleaved(names, async (impl) => {
        const one = byName.get(impl)!(pool, `solo:${impl}`);
        return timeLoop(async () => (await one())(), durationMs);
      }, (r) => r.opsPerSec);
      for (const [impl, { median: r, keys, all }] of solo) rows.push({ group, scenario: 'uncontended acquire+release', impl, opsPerSec: r.opsPerSec, opsPerRound: all.map((a) => a.opsPerSec), p50Ms: r.p50Ms, p99Ms: r.p99Ms, notes: notes(cpuNote(all.map((a) => a.cpuUsPerCall)), spread(keys, 'ops/s')) });
      const ten = await interleaved(names, (impl) => contend(Array.from({ length: 10 }, () => byName.get(impl)!(pool, `ten:${impl}`)), durationMs), (c) => c.opsPerSec);
      for (const [impl, { median: c, keys }] of ten) rows.push(contentionRow(group, impl, c, spread(keys, 'ops/s')));
      const hand = await interleaved(names, (impl) => handoff(byName.get(impl)!(pool, `handoff:${impl}`), byName.get(impl)!(pool, `handoff:${impl}`), Math.min(durationMs, 1500)), (h) => h.p50);
      for (const [impl, { median: h, keys }] of hand) rows.push({ group, scenario: 'hand-off release → waiter granted', impl, p50Ms: h.p50, p99Ms: h.p99, notes: notes(`${h.samples} hand-offs`, spread(keys, 'p50 ms')) });
    }
  } finally {
    await pool.end();
    await server.stop();
  }
  return rows;
}

export const cases: BenchCase[] = [{ group: 'postgres lock', rowGroups: groups.map(([g]) => g), run }];
