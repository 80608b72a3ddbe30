import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { shardsOf } from '../../src/index.js';
import { EtcdServer, PostgresServer } from '../../src/testing/index.js';
import { exited, runExample, type Line } from '../helpers/example.js';
import { pollValue } from '../helpers/wait.js';
import { makePool } from '../postgres/helpers.js';

/**
 * The runnable examples of issue 11, as users run them, on a real etcd and Postgres:
 * examples/cron-singleton (three copies, one cron, a failover in the middle) and
 * examples/fenced-worker (a paused worker's late write is refused by its fence), and
 * examples/shards (a partitioned pool: shards spread, moved on a join, taken over after a crash).
 */
const cronJob = new URL('../../examples/cron-singleton/job.ts', import.meta.url).pathname;
const worker = new URL('../../examples/fenced-worker/worker.ts', import.meta.url).pathname;
const shardWorker = new URL('../../examples/shards/worker.ts', import.meta.url).pathname;
let etcd: EtcdServer;
let postgres: PostgresServer;
let pool: pg.Pool;
beforeAll(async () => {
  [etcd, postgres] = await Promise.all([new EtcdServer().start(), new PostgresServer().start()]);
  pool = makePool(postgres.connectionConfig); // (with an error listener: idle clients see the server's shutdown at teardown)
});
afterAll(async () => {
  await pool?.end();
  await Promise.all([etcd?.stop(), postgres?.stop()]);
});

const count = (copies: { lines: Line[] }[], event: string): number => copies.reduce((n, c) => n + c.lines.filter((l) => l.event === event).length, 0);

describe('examples/cron-singleton', () => {
  it('three copies, one cron: each tick runs once across the group; a leader SIGTERMed mid-run loses at most the tick in flight (the successor catches it up when elected before the next tick)', async () => {
    const job = `report-${process.pid}`;
    const copies = [0, 1, 2].map(() => runExample(cronJob, [etcd.endpoints[0]!, postgres.connectionString, '* * * * * *', job]));
    try {
      await pollValue(async () => (count(copies, 'done') >= 3 ? true : undefined), 30_000);
      const leader = copies.find((c) => c.lines.findLast((l) => l.event === 'leader' || l.event === 'follower')?.event === 'leader')!;
      const from = leader.lines.length;
      const inFlight = await pollValue(async () => leader.lines.slice(from).find((l) => l.event === 'run'), 10_000);
      leader.child.kill('SIGTERM');
      expect(await exited(leader.child)).toBe(0);
      const others = copies.filter((c) => c !== leader);
      const doneBefore = count(others, 'done');
      await pollValue(async () => (count(others, 'done') >= doneBefore + 3 ? true : undefined), 30_000);
      for (const c of others) c.child.kill('SIGTERM');
      await Promise.all(others.map((c) => exited(c.child)));

      const rows = (await pool.query<{ tick: Date; runner: string; fence: string }>('SELECT tick, runner, fence::text AS fence FROM nightly_reports WHERE job = $1 ORDER BY tick', [job])).rows;
      const ticks = rows.map((r) => r.tick.getTime());
      expect(new Set(ticks).size).toBe(ticks.length); // never twice for one tick
      expect(rows.length).toBe(count(copies, 'done'));
      expect(new Set(rows.map((r) => r.runner)).size).toBeGreaterThanOrEqual(2); // the failover happened
      const missed = (ticks.at(-1)! - ticks[0]!) / 1000 + 1 - ticks.length;
      console.log(`[cron-singleton] ${rows.length} ticks written by ${new Set(rows.map((r) => r.runner)).size} copies, ${missed} missed; the tick in flight at the SIGTERM: ${inFlight.tick}`);
      // At most the tick in flight is lost: the successor runs the latest tick it missed at once
      // (catchUpMs) — the aborted one itself when it was elected before the next tick came due (the
      // usual case), else that next one. A tick the old leader finished after all is not repeated.
      expect(missed).toBeLessThanOrEqual(1);
      expect(rows.filter((r) => r.tick.getTime() === new Date(inFlight.tick as string).getTime()).length).toBeLessThanOrEqual(1);
      for (let i = 1; i < rows.length; i++) expect(BigInt(rows[i]!.fence)).toBeGreaterThanOrEqual(BigInt(rows[i - 1]!.fence));
      expect(count(copies, 'refused')).toBe(0);
    } finally {
      for (const c of copies) c.child.kill('SIGKILL');
    }
  }, 90_000);
});

describe('examples/cron-singleton after a crash', () => {
  it('the leader SIGKILLed in the middle of a run: the copy elected after the TTL runs the latest tick it missed at once, so a crash costs at most one tick', async () => {
    const job = `crash-${process.pid}`;
    // A tick every 4 s, longer than the failover gap (TTL 2 s), as a nightly job's is.
    const copies = [0, 1].map(() => runExample(cronJob, [etcd.endpoints[0]!, postgres.connectionString, '*/4 * * * * *', job]));
    try {
      const leader = await pollValue(async () => copies.find((c) => c.lines.some((l) => l.event === 'run')), 30_000);
      const inFlight = leader.lines.find((l) => l.event === 'run')!;
      leader.child.kill('SIGKILL');
      const other = copies.find((c) => c !== leader)!;
      await pollValue(async () => (other.lines.filter((l) => l.event === 'done').length >= 2 ? true : undefined), 30_000);
      other.child.kill('SIGTERM');
      await exited(other.child);
      const rows = (await pool.query<{ tick: Date; runner: string }>('SELECT tick, runner FROM nightly_reports WHERE job = $1 ORDER BY tick', [job])).rows;
      const ticks = rows.map((r) => r.tick.getTime());
      const killedTick = new Date(inFlight.tick as string).getTime();
      console.log(`[cron-singleton] crash: ${rows.length} ticks written by the successor; the tick in flight at the SIGKILL (${inFlight.tick}) ${ticks[0] === killedTick ? 'was caught up' : 'was lost (the successor was elected after the next tick came due, and ran that one at once)'}`);
      // The successor's first run is that tick or the next one (the latest tick missed before its
      // term, run at once). A crash costs at most one tick: the one in flight, or the next one when
      // the catch-up run was still going when it came due (skipped like any tick due during a run).
      // If the successor's own term was lost and won again (a loaded machine can miss a 2 s lease's
      // deadline), each loss may cost one more.
      expect([killedTick, killedTick + 4000]).toContain(ticks[0]);
      expect(rows.every((r) => r.runner === other.lines[0]!.id)).toBe(true);
      expect(new Set(ticks).size).toBe(ticks.length);
      const terms = other.lines.filter((l) => l.event === 'leader').length;
      const missed = (ticks.at(-1)! - killedTick) / 4000 + 1 - ticks.length;
      if (missed > 0) console.log(`[cron-singleton] crash: ${missed} tick(s) missed; the successor's ${terms} term(s):`, other.lines.map((l) => `${l.event}${l.tick ? ` ${String(l.tick)}` : ''}${l.reason ? ` (${String(l.reason)})` : ''}`).join(', '));
      expect(missed).toBeLessThanOrEqual(terms);
    } finally {
      for (const c of copies) c.child.kill('SIGKILL');
    }
  }, 90_000);
});

describe('examples/fenced-worker', () => {
  it("a worker paused past its TTL: the successor writes with a higher fence, and the paused worker's late write is refused (or, paused inside a write, cut off)", async () => {
    const name = `ledger-${process.pid}`;
    const a = runExample(worker, [postgres.connectionString, name]);
    await pollValue(async () => (a.lines.some((l) => l.event === 'wrote') ? true : undefined), 30_000);
    const b = runExample(worker, [postgres.connectionString, name]);
    try {
      await pollValue(async () => (b.lines.some((l) => l.event === 'started') ? true : undefined), 30_000);
      // Pause a just after a write, while it prepares the next (300 ms): paused between writes, it
      // wakes with a write on its way, as the example is about. (Paused at a random point, it could
      // also wake after its term's signal had aborted and send nothing, or inside a write.)
      const written = a.lines.filter((l) => l.event === 'wrote').length;
      await pollValue(async () => (a.lines.filter((l) => l.event === 'wrote').length > written ? true : undefined), 30_000, 2);
      a.child.kill('SIGSTOP');
      await pollValue(async () => (b.lines.some((l) => l.event === 'wrote') ? true : undefined), 30_000);
      a.child.kill('SIGCONT');
      // Paused between writes, a wakes and sends the write it prepared: refused. Paused inside a
      // write (the test was slower than a's 300 ms), its session was ended by the server (the
      // resource's idleTimeoutMs) so b could write: that write fails. Either way nothing of a's
      // lands after b's (the ledger below).
      const late = await pollValue(async () => a.lines.find((l) => l.event === 'refused' || l.event === 'write-failed'), 15_000);
      console.log(`[fenced-worker] the paused worker's late write: ${late.event}`);
      const bFence = BigInt(b.lines.find((l) => l.event === 'leader')!.fence!);
      expect(BigInt(late.fence!)).toBeLessThan(bFence);
      if (late.event === 'refused') expect(BigInt(late.highest as string)).toBeGreaterThanOrEqual(bFence);
      // In the ledger, in the order written: fences never go down, and nothing of a's after b's first.
      const rows = (await pool.query<{ writer: string; fence: string }>('SELECT writer, fence::text AS fence FROM ledger_entries WHERE ledger = $1 ORDER BY seq', [name])).rows;
      for (let i = 1; i < rows.length; i++) expect(BigInt(rows[i]!.fence)).toBeGreaterThanOrEqual(BigInt(rows[i - 1]!.fence));
      const firstB = rows.findIndex((r) => r.writer === b.lines[0]!.id);
      expect(firstB).toBeGreaterThan(0);
      expect(rows.slice(firstB).every((r) => r.writer === b.lines[0]!.id)).toBe(true);
      b.child.kill('SIGTERM');
      expect(await exited(b.child)).toBe(0);
    } finally {
      a.child.kill('SIGCONT');
      a.child.kill('SIGKILL');
      b.child.kill('SIGKILL');
    }
  }, 90_000);
});

describe('examples/shards', () => {
  /** The shards each copy holds now, by its own lines. */
  const holding = (c: { lines: Line[] }): Set<number> => {
    const held = new Set<number>();
    for (const l of c.lines) {
      if (l.event === 'acquired') held.add(l.shard as number);
      else if (l.event === 'released') held.delete(l.shard as number);
    }
    return held;
  };
  /**
   * Every copy holds exactly the shards rendezvous hashing gives it among `copies` (weight 1):
   * the moves of a change are over. "Every shard held by one" alone also holds mid-way (a joiner
   * that has taken one shard of several while the rest still wait for their release).
   */
  const settled = (copies: { lines: Line[] }[], shards: number): boolean => {
    const members = copies.map((c) => ({ id: c.lines[0]?.id as string, weight: 1 }));
    if (members.some((m) => m.id === undefined)) return false;
    return copies.every((c, i) => {
      const want = shardsOf(members[i]!.id, members, shards);
      const held = holding(c);
      return held.size === want.length && want.every((s) => held.has(s));
    });
  };

  it("a pool of copies: every shard held by one; a new copy takes about 1/M of them, each after its old owner's release; a SIGKILLed copy's shards are taken over; the ledgers' fences never go down", async () => {
    const group = `pool-${process.pid}`;
    const SHARDS = 12;
    const start = () => runExample(shardWorker, [etcd.endpoints[0]!, postgres.connectionString, String(SHARDS), group]);
    const [a, b] = [start(), start()];
    const copies = [a, b];
    try {
      await pollValue(async () => (settled([a, b], SHARDS) ? true : undefined), 30_000);
      const before = [holding(a), holding(b)];
      const c = start();
      copies.push(c);
      await pollValue(async () => (settled([a, b, c], SHARDS) ? true : undefined), 30_000);
      // Only shards now c's moved, and each was released by its old owner before c acquired it.
      expect([...holding(a)].every((s) => before[0]!.has(s))).toBe(true);
      expect([...holding(b)].every((s) => before[1]!.has(s))).toBe(true);
      // Every shard held by exactly one copy. How many c took is rendezvous hashing's draw over the
      // three ids (settled() checked it is exactly that): about 1/M, but 7 or 8 of 12 happens.
      const all = [a, b, c].flatMap((x) => [...holding(x)]);
      expect(all.sort((x, y) => x - y)).toEqual(Array.from({ length: SHARDS }, (_, i) => i));
      for (const l of c.lines.filter((x) => x.event === 'acquired')) {
        const owner = [a, b].find((o) => o.lines.some((x) => x.event === 'released' && x.shard === l.shard));
        expect(owner?.lines.find((x) => x.event === 'released' && x.shard === l.shard)?.moved, `shard ${l.shard as number} moved`).toBe(true);
      }
      console.log(`[shards] ${SHARDS} shards: two copies ${before.map((h) => h.size).join('/')}; a third joined and took ${holding(c).size}`);
      a.child.kill('SIGKILL');
      await exited(a.child);
      await pollValue(async () => (settled([b, c], SHARDS) ? true : undefined), 30_000);
      for (const x of [b, c]) x.child.kill('SIGTERM');
      expect(await Promise.all([b, c].map((x) => exited(x.child)))).toEqual([0, 0]);
      const rows = (await pool.query<{ shard: number; writer: string; fence: string }>('SELECT shard, writer, fence::text AS fence FROM shard_ledger WHERE grp = $1 ORDER BY seq', [group])).rows;
      for (let s = 0; s < SHARDS; s++) {
        const mine = rows.filter((r) => r.shard === s);
        expect(mine.length, `shard ${s} written`).toBeGreaterThan(0);
        for (let i = 1; i < mine.length; i++) expect(BigInt(mine[i]!.fence)).toBeGreaterThanOrEqual(BigInt(mine[i - 1]!.fence));
      }
    } finally {
      for (const x of copies) x.child.kill('SIGKILL');
    }
  }, 90_000);
});
