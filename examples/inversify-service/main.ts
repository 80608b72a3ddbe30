/**
 * A `@Leader()` service in an inversify container, on etcd: run two or more copies; only the
 * leader's copy compiles reports, each stamped with its term's fence (read with currentTerm()
 * deep in the call, not passed down). Kill the leader and another copy takes over; SIGTERM a copy
 * and the container unbinds: the manager resigns, the running report's signal aborts, it drains.
 *
 *   node --import tsx examples/inversify-service/main.ts http://127.0.0.1:2379 [service]
 *
 * It prints one JSON line per event on stdout (the test reads them).
 */
import 'reflect-metadata';
import { Container, inject, injectable } from 'inversify';
import { currentTerm, Leader, type DemotionInfo, type TermContext } from '../../src/index.js';
import { EtcdElection, EtcdSession } from '../../src/recipes/etcd/index.js';
import { leadershipModule } from '../../src/integrations/inversify/index.js';

const [endpoint = 'http://127.0.0.1:2379', service = 'reports'] = process.argv.slice(2);
const id = `${service}-${process.pid}`;
const say = (event: string, data: Record<string, unknown> = {}): void => console.log(JSON.stringify({ event, id, ...data }));

/** A repository deep in the call tree: it takes the fence from the term it runs in. */
@injectable()
class ReportStore {
  save(n: number): void {
    const { fence } = currentTerm();
    say('report', { n, fence: String(fence) });
  }
}

@injectable()
@Leader(service)
class ReportService {
  constructor(@inject(ReportStore) private readonly store: ReportStore) {}

  onElected({ fence }: TermContext): void {
    say('active', { fence: String(fence) });
  }

  onDemoted({ reason, fence }: DemotionInfo): void {
    say('passive', { reason, fence: String(fence) });
  }

  /** Runs on the leader only (elsewhere it resolves undefined at once). */
  @Leader()
  async compile(n: number): Promise<void> {
    const { signal } = currentTerm();
    await new Promise((r) => setTimeout(r, 100)); // the work; a real one passes `signal` on
    if (!signal.aborted) this.store.save(n);
  }
}

const session = await EtcdSession.create({ hosts: [endpoint], ttlMs: 2000 });
const container = new Container();
container.bind(ReportStore).toSelf().inSingletonScope();
await container.loadAsync(
  leadershipModule({
    candidate: (election) => new EtcdElection(session, `services/${election}`, { id }),
    services: [ReportService],
    manager: { drainTimeoutMs: 5000 },
  }),
);
const reports = container.get(ReportService); // activation: the manager starts campaigning
let n = 0;
const timer = setInterval(() => void reports.compile(++n), 200);

const stop = async (): Promise<void> => {
  clearInterval(timer);
  await container.unbindAllAsync(); // each manager closes: resign, drain, release
  await session.close();
  say('stopped');
  process.exit(0);
};
process.once('SIGTERM', () => void stop());
process.once('SIGINT', () => void stop());
say('started');
