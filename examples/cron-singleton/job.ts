/**
 * A cron job that must not double-fire — "the nightly report" — run as a singleton across any
 * number of copies: each copy campaigns on etcd; only the leader's `manager.cron()` fires, and
 * each report is written to Postgres through a PostgresFencedResource with the term's fence, so
 * even a leader that missed its demotion (paused, partitioned) cannot write a report late.
 * When the leader goes, the run in flight aborts (SIGTERM: it resigns) or dies with it (SIGKILL),
 * and the copy elected next runs that tick at once (`catchUpMs`: the latest tick missed before
 * its term, once — never a burst; a tick that comes due while that run is still going runs right
 * after it) and then the following ones. A report is keyed by its tick, so
 * a tick the old leader had finished after all is not written twice.
 *
 *   node --import tsx examples/cron-singleton/job.ts <etcd url> <postgres url> ['<cron expression>']
 *   e.g. node --import tsx examples/cron-singleton/job.ts http://127.0.0.1:2379 postgres://postgres@127.0.0.1:5432/postgres '0 2 * * *'
 *
 * It prints one JSON line per event on stdout (the test reads them).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { LeadershipManager, shutdownOnSignals, StaleFenceError } from '../../src/index.js';
import { EtcdElection, EtcdSession } from '../../src/recipes/etcd/index.js';
import { PostgresFencedResource, withXactLock } from '../../src/recipes/postgres/index.js';

const [etcdUrl = 'http://127.0.0.1:2379', pgUrl = 'postgres://postgres@127.0.0.1:5432/postgres', expression = '* * * * * *', name = 'nightly-report'] = process.argv.slice(2);
const id = `${name}-${process.pid}`;
const say = (event: string, data: Record<string, unknown> = {}): void => console.log(JSON.stringify({ event, id, ...data }));

const pool = new pg.Pool({ connectionString: pgUrl, max: 2 });
// Copies start together, and concurrent CREATE TABLE IF NOT EXISTS can collide in the catalog
// (a duplicate-key error): one copy at a time creates it, under a lock of its own.
await withXactLock(pool, 'examples: create tables', ({ client }) => client.query('CREATE TABLE IF NOT EXISTS nightly_reports (job text NOT NULL, tick timestamptz NOT NULL, runner text NOT NULL, fence bigint NOT NULL, PRIMARY KEY (job, tick))'));
const reports = new PostgresFencedResource(pool, `reports:${name}`);

const session = await EtcdSession.create({ hosts: [etcdUrl], ttlMs: 2000 });
const manager = new LeadershipManager(new EtcdElection(session, `cron/${name}`, { id }), { drainTimeoutMs: 5000 });
manager.cron(expression, async ({ signal, fence, scheduledAt }) => {
  const tick = scheduledAt.toISOString();
  say('run', { tick, fence: String(fence) });
  // The report takes a while; it gives up the moment leadership may be lost.
  await sleep(300, undefined, { signal }).catch((e: unknown) => {
    say('aborted', { tick, fence: String(fence) });
    throw signal.aborted ? signal.reason : e;
  });
  try {
    const { rowCount } = await reports.write(fence, (tx) =>
      tx.query('INSERT INTO nightly_reports (job, tick, runner, fence) VALUES ($1, $2, $3, $4) ON CONFLICT (job, tick) DO NOTHING', [name, scheduledAt, id, String(fence)]),
    );
    say(rowCount === 1 ? 'done' : 'already-done', { tick, fence: String(fence) });
  } catch (e) {
    if (e instanceof StaleFenceError) say('refused', { tick, fence: String(fence) });
    throw e;
  }
}, { catchUpMs: 10_000 });
manager.onElected(({ fence }) => say('leader', { fence: String(fence) }));
manager.onDemoted(({ reason }) => say('follower', { reason }));
manager.on('error', (e) => say('error', { message: String((e as Error).message) }));
shutdownOnSignals(manager, { exit: (code) => void pool.end().finally(() => process.exit(code)) });
manager.start();
say('started');
