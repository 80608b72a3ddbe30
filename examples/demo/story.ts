/**
 * The lifecycle manager's story on one backend: three candidate processes (candidate.ts), a
 * crash, Kleppmann's paused leader and a resign hand-off, narrated as the hooks fire, with every
 * write applied to a fenced ledger hosted here.
 */
import { StaleFenceError } from '../../src/core/errors.js';
import { InMemoryFencedResource } from '../../src/core/memory-resource.js';
import { spawnWorker, type WorkerEvent, type WorkerHandle } from '../../src/testing/index.js';
import { at, newSection, openTerm, type Section } from './timeline.js';

type Ev = WorkerEvent<Record<string, string>>;
export type Say = (text: string, t?: bigint) => void;
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const NAMES = ['alice', 'bob', 'carol'];

export interface StoryResult {
  section: Section;
  pids: number[];
}

export async function managerStory(backend: 'etcd' | 'zk', endpoint: string, ttlMs: number, say: Say): Promise<StoryResult> {
  const lease = backend === 'etcd' ? 'lease' : 'session';
  const s = newSection(backend === 'etcd' ? `etcd: LeadershipManager, lease TTL ${ttlMs} ms` : `ZooKeeper: LeadershipManager, session timeout ${ttlMs} ms`, backend, ttlMs, NAMES);
  const ledger = new InMemoryFencedResource('ledger');
  const workers = new Map<string, WorkerHandle>();
  const elected: Ev[] = [];
  const file = new URL('./candidate.ts', import.meta.url).pathname;
  const showWrites = new Set<string>(); // the first write of each term is shown, then only rejections

  const onEvent = async (name: string, e: Ev): Promise<void> => {
    const fence = e.data.fence!;
    if (e.type === 'elected') {
      elected.push(e);
      s.terms.push({ name, fence, start: at(s, e.t), ended: 'still leading', writes: 0 });
      say(`${name}: onElected (fence ${fence}) — starts units of work, each written to the ledger with its fence`, e.t);
    } else if (e.type === 'write') {
      const t = at(s, e.t);
      await ledger.write(BigInt(fence), () => undefined).then(
        () => {
          s.writes.push({ name, fence, t, rejected: false });
          const term = s.terms.findLast((x) => x.name === name && x.fence === fence);
          if (term) term.writes++;
          if (!showWrites.has(fence)) say(`  ${name}'s write (unit ${e.data.unit}, fence ${fence}): accepted`, e.t);
          showWrites.add(fence);
        },
        (err: unknown) => {
          const highest = err instanceof StaleFenceError ? String(err.highest) : '?';
          s.writes.push({ name, fence, t, rejected: true, highest });
          say(`  ${name}'s write (unit ${e.data.unit}, fence ${fence}): REJECTED by the ledger — it has accepted fence ${highest}`, e.t);
        },
      );
    } else if (e.type === 'checked') {
      say(`${name} checked its ${lease}: still valid; its write is on the way …`, e.t);
    } else if (e.type === 'aborted') {
      const term = openTerm(s, name);
      if (term) {
        term.end = at(s, e.t);
        term.ended = e.data.reason === 'lost' ? `lost (${e.data.lostReason})` : e.data.reason!;
      }
      say(`${name}: the term's signal aborts (${e.data.reason}${e.data.lostReason ? `: ${e.data.lostReason}` : ''}) — ${Number(e.data.unit) ? `unit ${e.data.unit}, in flight, is abandoned` : 'no unit was in flight'}; draining`, e.t);
    } else if (e.type === 'drained') {
      say(`${name}: drained (flushed its work); only now does the manager release the ${lease}`, e.t);
    } else if (e.type === 'demoted') {
      say(`${name}: onDemoted(reason ${e.data.reason}${e.data.lostReason ? `, ${e.data.lostReason}` : ''}, drained in ${e.data.drainedMs} ms)`, e.t);
    }
  };
  const pump = async (name: string, w: WorkerHandle): Promise<void> => {
    for (let i = 0; ; i++) {
      let e: Ev;
      try {
        e = (await w.waitFor(() => true, { from: i, timeoutMs: 3_600_000 })) as Ev;
      } catch {
        return; // exited
      }
      await onEvent(name, e);
    }
  };
  const nextElected = async (n: number): Promise<Ev> => {
    const end = performance.now() + 20_000;
    while (elected.length <= n) {
      if (performance.now() > end) throw new Error(`demo: no term ${n + 1} on ${backend} within 20 s`);
      await sleep(10);
    }
    return elected[n]!;
  };
  const spawn = async (name: string): Promise<void> => {
    const w = await spawnWorker(file, [backend, endpoint, name, String(ttlMs)]);
    workers.set(name, w);
    void pump(name, w);
  };

  try {
    // All three start at once (a little apart, so they usually queue in this order).
    await Promise.all(NAMES.map((n, i) => sleep(i * 150).then(() => spawn(n))));
    await Promise.all([...workers.values()].map((w) => w.waitFor('ready', { timeoutMs: 20_000 })));
    await nextElected(0);
    await sleep(700);

    console.log(`\n  1. The leader crashes (SIGKILL): no hook can run; its ${lease} must expire before anyone else leads.`);
    const first = elected[0]!;
    const killName = first.data.name!;
    const tKill = process.hrtime.bigint();
    await workers.get(killName)!.kill();
    const t1 = openTerm(s, killName)!;
    t1.end = at(s, tKill);
    t1.ended = 'SIGKILL';
    s.faults.push({ kind: 'SIGKILL', name: killName, t: at(s, tKill) });
    say(`SIGKILL ${killName}`, tKill);
    const second = await nextElected(1);
    s.gaps.push({ cause: 'SIGKILL', from: at(s, tKill), to: at(s, second.t), name: second.data.name! });
    say(`failover: ${second.data.name} leads ${Math.round(at(s, second.t) - at(s, tKill))} ms after the crash (${lease} ${ttlMs} ms); fence ${second.data.fence} > ${first.data.fence}`, second.t);

    console.log(`\n  2. Kleppmann's paused leader: ${second.data.name} checks its ${lease}, then freezes (SIGSTOP) past it.`);
    await sleep(500);
    const pausedName = second.data.name!;
    const paused = workers.get(pausedName)!;
    paused.send({ cmd: 'slow-write' });
    await paused.waitFor('checked', { timeoutMs: 5000 });
    await sleep(100);
    const tStop = paused.pause();
    say(`SIGSTOP ${pausedName} (a stop-the-world pause between its check and its write)`, tStop);
    const third = await nextElected(2);
    s.gaps.push({ cause: 'SIGSTOP', from: at(s, tStop), to: at(s, third.t), name: third.data.name! });
    say(`${third.data.name} leads (fence ${third.data.fence}) once ${pausedName}'s ${lease} expired at the store, ${Math.round(at(s, third.t) - at(s, tStop))} ms into the pause`, third.t);
    await sleep(600);
    const tCont = paused.resume();
    s.faults.push({ kind: 'SIGSTOP', name: pausedName, t: at(s, tStop), until: at(s, tCont) });
    say(`SIGCONT ${pausedName}: it wakes up with its old fence ${second.data.fence} and a write in flight`, tCont);
    await paused.waitFor((e) => e.type === 'demoted' && e.data.fence === second.data.fence, { timeoutMs: 10_000 });
    for (let i = 0; i < 100 && !s.writes.some((w) => w.rejected); i++) await sleep(20);
    await sleep(400);

    console.log(`\n  3. A clean hand-off: ${third.data.name} resigns — signal, drain, release, onDemoted, then the next leader.`);
    const resigner = third.data.name!;
    const tResign = process.hrtime.bigint();
    s.faults.push({ kind: 'resign', name: resigner, t: at(s, tResign) });
    workers.get(resigner)!.send({ cmd: 'resign' });
    say(`${resigner}: manager.resign({ cooldownMs: 3000 })`, tResign);
    const fourth = await nextElected(3);
    s.gaps.push({ cause: 'resign', from: at(s, tResign), to: at(s, fourth.t), name: fourth.data.name! });
    say(`${fourth.data.name} leads (fence ${fourth.data.fence}) ${Math.round(at(s, fourth.t) - at(s, tResign))} ms after the resign — no waiting for a TTL`, fourth.t);
    await sleep(500);
  } finally {
    const tEnd = process.hrtime.bigint();
    await Promise.all([...workers.values()].map((w) => w.stop(3000)));
    for (const t of s.terms.filter((x) => x.end === undefined)) Object.assign(t, { end: at(s, tEnd), ended: 'demo ended' });
    s.durationMs = at(s);
  }
  return { section: s, pids: [...workers.values()].map((w) => w.pid) };
}
