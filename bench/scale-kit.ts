/** What the scale benches (scale.bench.ts, scale-10k.bench.ts) share: waiting, and counting watches at the server. */
import type { Etcd3 } from 'etcd3';
import zookeeper from 'node-zookeeper-client';
import { EtcdServer, fourLetterWord, type ZooKeeperServer } from '../src/testing/index.js';
import { httpRequest } from '../src/testing/net.js';

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Runs `make` for 0…n−1, `width` at a time. */
export async function batched<T>(n: number, width: number, make: (i: number) => Promise<T>): Promise<T[]> {
  const out: T[] = [];
  for (let i = 0; i < n; i += width) out.push(...(await Promise.all(Array.from({ length: Math.min(width, n - i) }, (_, k) => make(i + k)))));
  return out;
}

/** Polls `check` every 10 ms until it holds, printing `progress` every 10 s; throws after `timeoutMs`. */
export async function until(check: () => Promise<boolean>, what: string, progress: () => Promise<string>, timeoutMs = 120_000): Promise<void> {
  const end = performance.now() + timeoutMs;
  let report = performance.now() + 10_000;
  while (!(await check())) {
    if (performance.now() > end) throw new Error(`scale: ${what} not reached within ${timeoutMs} ms (${await progress()})`);
    if (performance.now() > report) {
      console.error(`bench scale: waiting for ${what}: ${await progress()}`);
      report += 10_000;
    }
    await sleep(10);
  }
}

/** Every watch the ZooKeeper server holds (`wchs`). */
export async function zkTotalWatches(zk: ZooKeeperServer): Promise<number> {
  return Number(/Total watches:(\d+)/.exec(await fourLetterWord(zk.port, 'wchs', 10_000))?.[1] ?? NaN);
}

/** The most watches on one path (`wchp`). */
export async function zkMaxWatchesOnOnePath(zk: ZooKeeperServer): Promise<number> {
  const wchp = await fourLetterWord(zk.port, 'wchp', 10_000);
  return Math.max(...wchp.split('\n/').map((block) => block.split('\n').filter((l) => /^\s+0x/.test(l)).length));
}

/**
 * Every watcher the etcd server holds (its metrics). NaN when /metrics does not answer within
 * `timeoutMs` (an etcd busy with 10,000 leases on a loaded machine): a poll then looks again.
 */
export async function etcdWatchers(etcd: EtcdServer, timeoutMs = 5000): Promise<number> {
  try {
    const { body } = await httpRequest(etcd.clientPort, '/metrics', { timeoutMs });
    return Number(/^etcd_debugging_mvcc_watcher_total (\d+)/m.exec(body)?.[1] ?? NaN);
  } catch {
    return NaN;
  }
}

/**
 * The server's watcher count once the previous round's watchers are gone: a finished watcher
 * lingers up to 1 s (watch.ts) and closing sessions cancel theirs meanwhile, so a count read at
 * once was a baseline that later fell (a 2-participant round then never saw its 2 new watchers).
 * Unchanged for 1.5 s, or 15 s at most.
 */
export async function settledWatchers(etcd: EtcdServer): Promise<number> {
  let last = await etcdWatchers(etcd);
  let since = performance.now();
  const end = since + 15_000;
  while (performance.now() < end) {
    await sleep(250);
    const now = await etcdWatchers(etcd);
    if (now !== last) [last, since] = [now, performance.now()];
    else if (performance.now() - since >= 1500) break;
  }
  return last;
}

/**
 * When the crashed leader's lease ran out, as seen here: a watch on its key or node (the oldest in
 * the queue), armed before the kill. A failover after SIGKILL is mostly the rest of the leader's
 * lease, which depends on where the kill fell between two of its keepalives or heartbeats (etcd:
 * anywhere from TTL × 2/3 to TTL; ZooKeeper: its session-expiry tick); the time from the deletion
 * to the next leader is the part that could grow with the waiters behind.
 */
export interface LeaderGone {
  /** process.hrtime.bigint() when the deletion was seen; undefined until then. */
  at(): bigint | undefined;
  close(): Promise<void>;
}

/** A failover from the kill's and the deletion's and the next election's `process.hrtime.bigint()`, in ms, whole and split. */
export function failoverParts(killed: bigint, deleted: bigint, elected: bigint): { failoverMs: number; leaseRestMs: number; afterDeletionMs: number } {
  const ms = (ns: bigint): number => Number(ns) / 1e6;
  return { failoverMs: ms(elected - killed), leaseRestMs: ms(deleted - killed), afterDeletionMs: ms(elected - deleted) };
}

export async function etcdLeaderGone(client: Etcd3, prefix: string): Promise<LeaderGone> {
  const oldest = (await client.getAll().prefix(prefix).sort('Create', 'Ascend').limit(1).keys())[0];
  if (oldest === undefined) throw new Error(`scale: no leader key under ${prefix}`);
  let at: bigint | undefined;
  const w = await client.watch().key(oldest).create();
  w.on('delete', () => (at ??= process.hrtime.bigint()));
  return { at: () => at, close: () => w.cancel() };
}

export async function zkLeaderGone(connectionString: string, path: string): Promise<LeaderGone> {
  const c = zookeeper.createClient(connectionString, { sessionTimeout: 30_000, retries: 0 });
  await new Promise<void>((resolve) => {
    c.once('connected', () => resolve());
    c.connect();
  });
  const children = await new Promise<string[]>((resolve, reject) => c.getChildren(path, (e, kids) => (e ? reject(e) : resolve(kids))));
  const seq = (name: string): number => Number(name.slice(-10));
  const oldest = children.sort((a, b) => seq(a) - seq(b))[0];
  if (oldest === undefined) throw new Error(`scale: no leader node under ${path}`);
  let at: bigint | undefined;
  await new Promise<void>((resolve, reject) =>
    c.exists(
      `${path}/${oldest}`,
      (event) => {
        if (event.getType() === zookeeper.Event.NODE_DELETED) at ??= process.hrtime.bigint();
      },
      (e, stat) => (e ? reject(e) : stat ? resolve() : reject(new Error(`scale: leader node ${oldest} already gone`))),
    ),
  );
  return { at: () => at, close: async () => c.close() };
}

/**
 * "from the leader's deletion to the next leader: 3.9 ms (rounds 3.7/7.5/3.9; 2 participants 3.0 ms,
 * 3.8/2.5/3.0)": the failover's part after the lease ran out, with many waiting and with 2. A few
 * ms either way, so no ratio: the waiter can hear the deletion before the observer does (below 0).
 */
export function deletionNote(many: number[], two: number[]): string {
  const f = (xs: number[]): string => xs.map((x) => x.toFixed(1)).join('/');
  const mid = (xs: number[]): string => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!.toFixed(1);
  return `from the leader's deletion to the next leader: ${mid(many)} ms (rounds ${f(many)}; 2 participants ${mid(two)} ms, ${f(two)})`;
}
