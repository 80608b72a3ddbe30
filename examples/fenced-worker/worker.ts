/**
 * A worker that writes only with its fence: run two or more copies on one Postgres. The leader
 * (a PgElection) appends entries to a ledger through a PostgresFencedResource, each write carrying
 * the term's fence. A copy that stops being leader without noticing — paused by the OS, a long GC,
 * a partition — may still send a write it prepared before; the resource refuses it
 * (StaleFenceError) because the successor has written with a higher fence. The signal stops
 * what can be stopped; the fence stops the rest.
 *
 *   node --import tsx examples/fenced-worker/worker.ts postgres://postgres@127.0.0.1:5432/postgres [name]
 *
 * It prints one JSON line per event on stdout (the test reads them).
 */
import pg from 'pg';
import { LeadershipManager, shutdownOnSignals, StaleFenceError } from '../../src/index.js';
import { PgElection, PostgresFencedResource, withXactLock } from '../../src/recipes/postgres/index.js';

const [pgUrl = 'postgres://postgres@127.0.0.1:5432/postgres', name = 'ledger-worker'] = process.argv.slice(2);
const id = `${name}-${process.pid}`;
const say = (event: string, data: Record<string, unknown> = {}): void => console.log(JSON.stringify({ event, id, ...data }));

const pool = new pg.Pool({ connectionString: pgUrl, max: 4 });
pool.on('error', () => undefined);
// Copies start together, and concurrent CREATE TABLE IF NOT EXISTS can collide in the catalog
// (a duplicate-key error): one copy at a time creates it, under a lock of its own.
await withXactLock(pool, 'examples: create tables', ({ client }) => client.query('CREATE TABLE IF NOT EXISTS ledger_entries (seq bigserial PRIMARY KEY, ledger text NOT NULL, entry int NOT NULL, writer text NOT NULL, fence bigint NOT NULL)'));
const ledger = new PostgresFencedResource(pool, `ledger:${name}`);

const manager = new LeadershipManager(new PgElection(pool, name, { id, ttlMs: 2000 }), { drainTimeoutMs: 3000 });
manager.onElected(async ({ signal, fence }) => {
  say('leader', { fence: String(fence) });
  for (let entry = 1; !signal.aborted; entry++) {
    // Prepare the entry (here a wait stands in for the work), then write it. A pause between the
    // two is what the fence is for: the signal cannot stop a write that is already on its way,
    // the resource can.
    await new Promise((r) => setTimeout(r, 300));
    try {
      await ledger.write(fence, (tx) => tx.query('INSERT INTO ledger_entries (ledger, entry, writer, fence) VALUES ($1, $2, $3, $4)', [name, entry, id, String(fence)]));
      say('wrote', { entry, fence: String(fence) });
    } catch (e) {
      if (e instanceof StaleFenceError) {
        say('refused', { entry, fence: String(fence), highest: String(e.highest) });
        return; // a successor has written: this term is over, whatever this process believes
      }
      // Its connection failed mid-write — or the server ended a session this process stalled
      // inside (a write holds the resource's row lock, so a stalled one is cut off after the
      // resource's idleTimeoutMs rather than block the successor): nothing of it committed.
      say('write-failed', { entry, fence: String(fence), error: (e as Error).message });
      throw e;
    }
  }
});
manager.onDemoted(({ reason, lostReason }) => say('follower', { reason, lostReason: lostReason ?? null }));
manager.on('error', (e) => say('error', { message: String((e as Error).message) }));
shutdownOnSignals(manager, { exit: (code) => void pool.end().finally(() => process.exit(code)) });
manager.start();
say('started');
