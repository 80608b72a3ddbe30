/**
 * An active-passive daemon on tenure's lifecycle manager: run two or more copies; exactly one is
 * active at a time, and the others take over when it dies, is partitioned or pauses. The active
 * copy's work gets the term's signal (it stops the moment leadership may be lost) and its fence
 * (every write carries it, so a copy that missed its demotion is refused by the store).
 *
 *   node --import tsx examples/active-passive/daemon.ts etcd http://127.0.0.1:2379 my-service
 *   node --import tsx examples/active-passive/daemon.ts zk 127.0.0.1:2181 my-service
 *
 * It prints one JSON line per event on stdout (the test reads them) and exits 0 on SIGTERM or
 * SIGINT after resigning: the term's signal aborts, the work drains, the lease is released.
 */
import { LeadershipManager, shutdownOnSignals, type Candidate } from '../../src/index.js';
import { EtcdElection, EtcdSession } from '../../src/recipes/etcd/index.js';
import { LeaderLatch, ZkSession } from '../../src/recipes/zk/index.js';

const [backend, endpoint, service = 'active-passive'] = process.argv.slice(2);
const id = `${service}-${process.pid}`;
const say = (event: string, data: Record<string, unknown> = {}): void => console.log(JSON.stringify({ event, id, ...data }));

async function candidate(): Promise<Candidate> {
  if (backend === 'etcd') {
    const session = await EtcdSession.create({ hosts: [endpoint!], ttlMs: 2000 });
    return new EtcdElection(session, `services/${service}`, { id });
  }
  if (backend === 'zk') {
    const session = await ZkSession.create({ connectionString: endpoint!, ttlMs: 2000 });
    return new LeaderLatch(session, `/services/${service}`, { id });
  }
  console.error('usage: daemon.ts etcd|zk <endpoint> [service]');
  process.exit(2);
}

/** The service's work: one unit every 200 ms while active, each stamped with the term's fence. */
async function serve(signal: AbortSignal, fence: bigint): Promise<void> {
  let n = 0;
  while (!signal.aborted) {
    say('work', { fence: String(fence), n: ++n });
    await new Promise((r) => setTimeout(r, 200));
  }
}

const manager = new LeadershipManager(await candidate(), { drainTimeoutMs: 5000 });
manager.onElected(async ({ signal, fence }) => {
  say('active', { fence: String(fence) });
  await serve(signal, fence);
});
manager.onDemoted(({ reason, lostReason, fence, drainedMs }) => say('passive', { reason, lostReason, fence: String(fence), drainedMs: Math.round(drainedMs) }));
manager.on('leaderChanged', (leader) => say('leader', { leader: leader?.id ?? null }));
manager.on('error', (e) => say('error', { message: String((e as Error).message) }));
shutdownOnSignals(manager);
manager.start();
say('started');
