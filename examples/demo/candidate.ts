/**
 * One candidate of the demo, in its own process: a LeadershipManager on etcd or ZooKeeper whose
 * `onElected` does real work while it leads — units of 250 ms of "computation" run with the
 * term's signal (so demotion aborts the unit in flight), each followed by a write sent with the
 * term's fence to the ledger the demo hosts (a fenced resource). When the term ends it drains
 * (flushes for 150 ms) before the manager releases the lease, and then `onDemoted` fires.
 *
 * argv: backend (etcd|zk) endpoint name ttlMs. Parent messages: { cmd: 'slow-write' } (the next
 * unit checks the lease, then takes 400 ms before its write — the window a GC pause hits),
 * { cmd: 'resign' } (hand leadership over: resign with a cooldown).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { LeadershipManager, TermEndedError, shutdownOnSignals, type Candidate } from '../../src/index.js';
import { EtcdElection, EtcdSession } from '../../src/recipes/etcd/index.js';
import { LeaderLatch, ZkSession } from '../../src/recipes/zk/index.js';
import { onParentMessage, workerReport } from '../../src/testing/index.js';

const [backend, endpoint, name, ttlArg] = process.argv.slice(2) as [string, string, string, string];
const ttlMs = Number(ttlArg);

async function candidate(): Promise<Candidate> {
  if (backend === 'etcd') return new EtcdElection(await EtcdSession.create({ hosts: [endpoint], ttlMs }), 'demo/leader', { id: name });
  return new LeaderLatch(await ZkSession.create({ connectionString: endpoint, ttlMs }), '/demo/leader', { id: name });
}

let slowNext = false;
const manager = new LeadershipManager(await candidate(), { drainTimeoutMs: 3000, backoff: { initialMs: 50, maxMs: 300 } });
onParentMessage((m) => {
  const cmd = (m as { cmd?: string }).cmd;
  if (cmd === 'slow-write') slowNext = true;
  if (cmd === 'resign') void manager.resign({ cooldownMs: 3000 });
});

manager.onElected(async ({ signal, fence, term }) => {
  workerReport('elected', { name, fence: String(fence) });
  let unit = 0;
  let inFlight = false;
  try {
    while (!signal.aborted) {
      unit++;
      inFlight = true;
      await sleep(250, undefined, { signal }); // a unit of work in flight: the term's signal aborts it
      term.throwIfLost(); // the lease is still ours …
      if (slowNext) {
        slowNext = false;
        workerReport('checked', { name, fence: String(fence), unit });
        await sleep(400); // … but this write goes out later, without another check
      }
      workerReport('write', { name, fence: String(fence), unit });
      inFlight = false;
    }
  } catch (e) {
    if (!signal.aborted) throw e;
  }
  const why = signal.reason instanceof TermEndedError ? signal.reason : undefined;
  workerReport('aborted', { name, fence: String(fence), unit: inFlight ? unit : 0, reason: why?.reason ?? 'ended', lostReason: why?.lostReason ?? '' });
  await sleep(150); // the drain: flush what the term produced; the lease is released only after this
  workerReport('drained', { name, fence: String(fence) });
});
manager.onDemoted(({ reason, lostReason, fence, drainedMs }) => void workerReport('demoted', { name, fence: String(fence), reason, lostReason: lostReason ?? '', drainedMs: Math.round(drainedMs) }));
manager.on('error', () => undefined);
shutdownOnSignals(manager);
manager.start();
workerReport('ready', { name });
