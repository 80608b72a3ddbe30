import 'reflect-metadata';
import { Container, injectable } from 'inversify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { currentTerm, Leader, LeadershipManager, type DemotionInfo, type TermContext } from '../../src/index.js';
import { leadershipManagerId, leadershipModule } from '../../src/integrations/inversify/index.js';
import { EtcdElection, EtcdSession, createEtcdClient } from '../../src/recipes/etcd/index.js';
import { EtcdServer } from '../../src/testing/index.js';
import { exited, runExample } from '../helpers/example.js';
import { pollValue } from '../helpers/wait.js';

/**
 * tenure/inversify (issue 11) on a real etcd: the module binds a manager per election, starts it
 * when the container activates the service, and closes it (resign + drain) when the container is
 * unbound; and the runnable example (examples/inversify-service) in two processes.
 */
const example = new URL('../../examples/inversify-service/main.ts', import.meta.url).pathname;
let etcd: EtcdServer;
let client: Awaited<ReturnType<typeof createEtcdClient>>;
let session: EtcdSession;
beforeAll(async () => {
  etcd = await new EtcdServer().start();
  client = await createEtcdClient({ hosts: etcd.endpoints });
  session = await EtcdSession.create({ client, ttlMs: 2000 });
});
afterAll(async () => {
  await session?.close();
  client?.close();
  await etcd?.stop();
});

@injectable()
@Leader('inv-reports')
class Reports {
  readonly log: string[] = [];
  onElected(ctx: TermContext): void {
    this.log.push(`elected ${ctx.fence}`);
  }
  onDemoted(info: DemotionInfo): void {
    this.log.push(`demoted ${info.reason}`);
  }
  @Leader()
  async compile(ms: number): Promise<{ fence: bigint; aborted: boolean }> {
    const { fence, signal } = currentTerm();
    await new Promise((r) => setTimeout(r, ms));
    return { fence, aborted: signal.aborted };
  }
}

describe('tenure/inversify', () => {
  it('activating the service starts its manager; unbinding the container resigns and drains it', async () => {
    const container = new Container();
    const made: string[] = [];
    await container.loadAsync(leadershipModule({ candidate: (e) => (made.push(e), new EtcdElection(session, `inv/${e}`)), services: [Reports], elections: ['inv-extra'], manager: { drainTimeoutMs: 3000 } }));
    expect(made).toEqual([]); // nothing runs before resolution
    const svc = container.get(Reports);
    expect(container.get(Reports)).toBe(svc); // singleton
    const manager = container.get<LeadershipManager>(leadershipManagerId('inv-reports'));
    expect(made).toEqual(['inv-reports']);
    const term = await manager.whenElected({ timeoutMs: 10_000 });
    expect(await svc.compile(1)).toEqual({ fence: term.fence, aborted: false });
    const inFlight = svc.compile(400);
    await new Promise((r) => setTimeout(r, 50));
    await container.unbindAllAsync();
    expect(manager.state).toBe('closed');
    expect(await inFlight).toEqual({ fence: term.fence, aborted: true }); // its signal aborted; the close waited for it
    expect(svc.log).toEqual([`elected ${term.fence}`, 'demoted closed']);
  });

  it('examples/inversify-service: only the leader compiles reports; a SIGKILLed leader is succeeded with a higher fence; SIGTERM unbinds the container cleanly', async () => {
    const service = `inv-example-${process.pid}`;
    const a = runExample(example, [etcd.endpoints[0]!, service]);
    const b = runExample(example, [etcd.endpoints[0]!, service]);
    try {
      const first = await pollValue(async () => [a, b].find((x) => x.lines.some((l) => l.event === 'report')), 30_000);
      const other = first === a ? b : a;
      await pollValue(async () => (other.lines.some((l) => l.event === 'started') ? true : undefined), 30_000);
      await new Promise((r) => setTimeout(r, 600));
      expect(other.lines.some((l) => l.event === 'report')).toBe(false); // passive copies skip the call
      const fence1 = BigInt(first.lines.find((l) => l.event === 'active')!.fence!);
      first.child.kill('SIGKILL');
      await pollValue(async () => (other.lines.some((l) => l.event === 'report') ? true : undefined), 30_000);
      const fence2 = BigInt(other.lines.find((l) => l.event === 'active')!.fence!);
      expect(fence2).toBeGreaterThan(fence1);
      expect(other.lines.filter((l) => l.event === 'report').every((l) => BigInt(l.fence!) === fence2)).toBe(true);
      other.child.kill('SIGTERM');
      expect(await exited(other.child)).toBe(0);
      const passive = other.lines.findIndex((l) => l.event === 'passive');
      expect(other.lines[passive]!.reason).toBe('closed');
      expect(other.lines.findLastIndex((l) => l.event === 'report')).toBeLessThan(passive);
      expect(other.lines.at(-1)!.event).toBe('stopped');
    } finally {
      a.child.kill('SIGKILL');
      b.child.kill('SIGKILL');
    }
  }, 90_000);
});
