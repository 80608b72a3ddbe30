/**
 * A partitioned worker pool: run any number of copies. The work is split into shards (think one
 * per tenant, per queue partition); each copy joins the group `workers` on etcd and a
 * ShardManager spreads the shards over the live copies by rendezvous hashing — each shard has one
 * leader, each copy leads only its own shards. A shard's term appends to that shard's ledger in
 * Postgres through a PostgresFencedResource with the shard's own fence, so a copy that lost a
 * shard without noticing (paused, partitioned) cannot write to it late. Start a copy: about 1/M
 * of the shards move to it, each only after its old owner drained and released it. Kill one:
 * its shards are taken over once its etcd lease expires (TTL 2 s).
 *
 *   node --import tsx examples/shards/worker.ts <etcd url> <postgres url> [shards] [group]
 *   e.g. node --import tsx examples/shards/worker.ts http://127.0.0.1:2379 postgres://postgres@127.0.0.1:5432/postgres 16
 *
 * It prints one JSON line per event on stdout (the test reads them).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { shutdownOnSignals, ShardManager, StaleFenceError } from '../../src/index.js';
import { EtcdElection, EtcdMembership, EtcdSession } from '../../src/recipes/etcd/index.js';
import { PostgresFencedResource, withXactLock } from '../../src/recipes/postgres/index.js';

const [etcdUrl = 'http://127.0.0.1:2379', pgUrl = 'postgres://postgres@127.0.0.1:5432/postgres', count = '16', group = 'workers'] = process.argv.slice(2);
const id = `${group}-${process.pid}`;
const say = (event: string, data: Record<string, unknown> = {}): void => console.log(JSON.stringify({ event, id, ...data }));

const pool = new pg.Pool({ connectionString: pgUrl, max: 4 });
pool.on('error', () => undefined);
// Copies start together, and concurrent CREATE TABLE IF NOT EXISTS can collide in the catalog
// (a duplicate-key error): one copy at a time creates it, under a lock of its own.
await withXactLock(pool, 'examples: create tables', ({ client }) => client.query('CREATE TABLE IF NOT EXISTS shard_ledger (seq bigserial PRIMARY KEY, grp text NOT NULL, shard int NOT NULL, writer text NOT NULL, fence bigint NOT NULL)'));
const ledgers = new Map<number, PostgresFencedResource>();
const ledger = (shard: number): PostgresFencedResource => {
  let r = ledgers.get(shard);
  if (!r) ledgers.set(shard, (r = new PostgresFencedResource(pool, `ledger:${group}:${shard}`)));
  return r;
};

// One session for the membership and every shard's election: one lease, one keepalive.
const session = await EtcdSession.create({ hosts: [etcdUrl], ttlMs: 2000 });
const shards = new ShardManager(new EtcdMembership(session, `${group}/members`, { id }), (shard) => new EtcdElection(session, `${group}/shards/${shard}`, { id }), { shards: Number(count), drainTimeoutMs: 3000 });

shards.onShardAcquired(async (shard, { signal, fence }) => {
  say('acquired', { shard, fence: String(fence) });
  while (!signal.aborted) {
    try {
      await ledger(shard).write(fence, (tx) => tx.query('INSERT INTO shard_ledger (grp, shard, writer, fence) VALUES ($1, $2, $3, $4)', [group, shard, id, String(fence)]));
      say('wrote', { shard, fence: String(fence) });
    } catch (e) {
      if (e instanceof StaleFenceError) return say('refused', { shard, fence: String(fence), highest: String(e.highest) }); // the shard's next owner has written
      say('write-failed', { shard, error: (e as Error).message });
    }
    // The next unit of work; the drain waits for it when the shard moves. (Node's timer drops its
    // abort listener when it fires: one added per unit and never removed would pile up on the
    // term's signal for as long as the term lasts.)
    await sleep(200, undefined, { signal }).catch(() => undefined);
  }
});
shards.onShardReleased((shard, { reason, moved }) => say('released', { shard, reason, moved }));
shards.on('assigned', (mine, { added, removed, members }) => say('assigned', { shards: mine, added: added.length, removed: removed.length, members: members.length }));
shards.on('error', (e) => say('error', { message: String((e as Error).message) }));
shutdownOnSignals(shards, { exit: (code) => void Promise.all([session.close(), pool.end()]).finally(() => process.exit(code)) });
shards.start();
say('started');
