/**
 * `npm run demo`: an etcd election with fencing, narrated. Starts a real etcd (tenure/testing),
 * three candidate processes writing with their fence to a fenced resource hosted here, then:
 * SIGKILL the leader (failover vs TTL), SIGSTOP the next one right after it checked its lease
 * (Kleppmann's scenario: its late write is rejected), a resign handoff, and a summary.
 */
import { StaleFenceError } from '../../src/core/errors.js';
import { InMemoryFencedResource } from '../../src/core/memory-resource.js';
import { EtcdServer, spawnWorker, type WorkerEvent, type WorkerHandle } from '../../src/testing/index.js';

const TTL = 2;
const t0 = process.hrtime.bigint();
const sec = (t: bigint): string => `${(Number(t - t0) / 1e9).toFixed(2).padStart(6)}s`;
const msBetween = (a: bigint, b: bigint): number => Math.round(Number(b - a) / 1e6);
const say = (text: string, t = process.hrtime.bigint()): void => console.log(`[${sec(t)}] ${text}`);
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

type Ev = WorkerEvent<Record<string, string>>;
const resource = new InMemoryFencedResource('ledger');
const workers = new Map<string, WorkerHandle>();
const terms: { name: string; fence: string; at: string }[] = [];
const writes = { accepted: 0, rejected: 0, rejectedWrites: [] as { name: string; fence: string; highest: string }[] };
const elected: Ev[] = [];
let quiet = false;

async function pump(name: string, w: WorkerHandle): Promise<void> {
  for (let i = 0; ; i++) {
    let e: Ev;
    try {
      e = (await w.waitFor(() => true, { from: i, timeoutMs: 3_600_000 })) as Ev;
    } catch {
      return; // exited
    }
    if (e.type === 'elected') {
      elected.push(e);
      terms.push({ name, fence: e.data.fence!, at: sec(e.t) });
      say(`${name} is elected leader (fence ${e.data.fence})`, e.t);
    } else if (e.type === 'lost') {
      say(`${name}'s term ${e.data.fence} ended: signal aborted (${e.data.reason})`, e.t);
    } else if (e.type === 'checked') {
      say(`${name} checked its lease: still valid; its write is on the way …`, e.t);
    } else if (e.type === 'write') {
      const fence = BigInt(e.data.fence!);
      await resource.write(fence, () => undefined).then(
        () => {
          writes.accepted++;
          if (!quiet) say(`  write #${e.data.seq} from ${name} with fence ${fence}: accepted`, e.t);
        },
        (err: unknown) => {
          writes.rejected++;
          const highest = err instanceof StaleFenceError ? String(err.highest) : '?';
          writes.rejectedWrites.push({ name, fence: String(fence), highest });
          say(`  write #${e.data.seq} from ${name} with fence ${fence}: REJECTED (stale; the resource has seen fence ${highest})`, e.t);
        },
      );
    }
  }
}

async function nextElected(after: number, timeoutMs = 15_000): Promise<Ev> {
  const end = performance.now() + timeoutMs;
  while (elected.length <= after) {
    if (performance.now() > end) throw new Error('demo: no leader elected in time');
    await sleep(10);
  }
  return elected[after]!;
}

async function main(): Promise<Record<string, unknown>> {
  console.log(`tenure demo: leader election on etcd with fencing tokens (lease TTL ${TTL} s)\n`);
  const etcd = await new EtcdServer().start();
  try {
    say(`etcd is up on ${etcd.endpoint}`);
    const file = new URL('./candidate.ts', import.meta.url).pathname;
    for (const name of ['alice', 'bob', 'carol']) {
      const w = await spawnWorker(file, [name, etcd.endpoint, String(TTL)]);
      workers.set(name, w);
      void pump(name, w);
      say(`started candidate ${name} (pid ${w.pid})`);
      if (name === 'alice') await nextElected(0);
      else await sleep(300); // queue in this order
    }

    console.log('\n1. The leader crashes (SIGKILL): its lease must run out before anyone else leads.');
    await sleep(700);
    quiet = true;
    const leader1 = elected[0]!;
    const tKill = process.hrtime.bigint();
    await workers.get('alice')!.kill();
    say('SIGKILL alice');
    const second = await nextElected(1);
    const failoverMs = msBetween(tKill, second.t);
    say(`failover took ${failoverMs} ms (TTL ${TTL * 1000} ms): ${second.data.name} leads with fence ${second.data.fence} > ${leader1.data.fence}`);

    console.log(`\n2. Kleppmann's scenario: ${second.data.name} checks its lease, then pauses (SIGSTOP) past the TTL.`);
    quiet = false;
    await sleep(600);
    const paused = workers.get(second.data.name!)!;
    paused.send({ cmd: 'slow-write' });
    await sleep(100);
    const tStop = paused.pause();
    say(`SIGSTOP ${second.data.name} (a stop-the-world pause right after its check)`, tStop);
    quiet = true;
    const third = await nextElected(2);
    say(`${third.data.name} is elected while ${second.data.name} is frozen (after ${msBetween(tStop, third.t)} ms)`, third.t);
    await sleep(TTL * 1000);
    quiet = false;
    const tCont = paused.resume();
    say(`SIGCONT ${second.data.name}: it wakes up still holding its old fence ${second.data.fence}`, tCont);
    const lost = await paused.waitFor<Record<string, string>>((e) => e.type === 'lost' && e.data.fence === second.data.fence, { timeoutMs: 10_000 });
    const before = writes.rejected;
    for (let i = 0; i < 200 && writes.rejected === before; i++) await sleep(10);
    const deadlineLeadMs = msBetween(BigInt(lost.data.deadlineNs!), third.t);
    say(`${second.data.name}'s local lease deadline had passed ${deadlineLeadMs} ms before ${third.data.name} was elected; fencing stopped the write the pause let through`);

    console.log(`\n3. A clean handoff: ${third.data.name} resigns.`);
    await sleep(500);
    quiet = true;
    const tResign = process.hrtime.bigint();
    workers.get(third.data.name!)!.send({ cmd: 'resign' });
    say(`${third.data.name} resigns`);
    const fourth = await nextElected(3);
    const handoffMs = msBetween(tResign, fourth.t);
    say(`${fourth.data.name} took over in ${handoffMs} ms`, fourth.t);
    await sleep(400);

    const fences = terms.map((t) => BigInt(t.fence));
    const summary = {
      ttlSeconds: TTL,
      terms,
      fencesIncreasing: fences.every((f, i) => i === 0 || f > fences[i - 1]!),
      failoverMs,
      pausedDeadlineBeforeNextElectedMs: deadlineLeadMs,
      handoffMs,
      writesAccepted: writes.accepted,
      writesRejected: writes.rejected,
      rejected: writes.rejectedWrites,
      highestFence: String(await resource.highestFence()),
      pids: [...workers.values()].map((w) => w.pid),
      etcdPid: etcd.pid,
    };
    console.log('\nSummary');
    console.log(`  terms:     ${terms.map((t) => `${t.name}@${t.fence}`).join(' → ')}`);
    console.log(`  failover after SIGKILL: ${failoverMs} ms (TTL ${TTL * 1000} ms); resign handoff: ${handoffMs} ms`);
    console.log(`  writes:    ${writes.accepted} accepted, ${writes.rejected} rejected (${writes.rejectedWrites.map((r) => `${r.name} with fence ${r.fence} < ${r.highest}`).join(', ')})`);
    return summary;
  } finally {
    await Promise.all([...workers.values()].map((w) => w.stop(1000)));
    await etcd.stop();
  }
}

main().then(
  (summary) => {
    console.log(`SUMMARY ${JSON.stringify(summary)}`);
    process.exit(0);
  },
  (e: unknown) => {
    console.error(e);
    process.exit(1);
  },
);
