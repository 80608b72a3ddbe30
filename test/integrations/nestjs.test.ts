import 'reflect-metadata';
import { Controller, Inject, Injectable, Module, Scope, type INestApplicationContext, type ModuleMetadata } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Interval, ScheduleModule, SchedulerRegistry, Timeout } from '@nestjs/schedule';
import { HealthCheckService, TerminusModule } from '@nestjs/terminus';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, currentTerm, Leader, type DemotionInfo, type TermContext } from '../../src/index.js';
import { InjectLeadership, LeadershipHealthIndicator, LeadershipService, TenureModule } from '../../src/integrations/nestjs/index.js';
import { EtcdElection, EtcdSession, createEtcdClient } from '../../src/recipes/etcd/index.js';
import { RedisElection } from '../../src/recipes/redis/index.js';
import { EtcdServer, RedisServer } from '../../src/testing/index.js';
import { pollValue } from '../helpers/wait.js';

/**
 * tenure/nestjs (issue 23) in-process, on a real etcd and a real Redis: Nest applications made
 * with NestFactory.createApplicationContext, as a worker without HTTP is. The two-process
 * example (SIGKILL, SIGTERM, the fenced resource) is nestjs-example.test.ts.
 */
let etcd: EtcdServer;
let redisServer: RedisServer;
let client: Awaited<ReturnType<typeof createEtcdClient>>;
const sessions: EtcdSession[] = [];
const redises: Redis[] = [];
const apps: INestApplicationContext[] = [];
beforeAll(async () => {
  [etcd, redisServer] = await Promise.all([new EtcdServer().start(), new RedisServer().start()]);
  client = await createEtcdClient({ hosts: etcd.endpoints });
});
afterAll(async () => {
  await Promise.allSettled(apps.map((a) => a.close()));
  await Promise.allSettled(sessions.map((s) => s.close()));
  for (const r of redises) r.disconnect();
  client?.close();
  await Promise.all([etcd?.stop(), redisServer?.stop()]);
});

/** A session with a long TTL: a hand-off within it is the released lease, not an expiry. */
async function session(ttlMs = 10_000): Promise<EtcdSession> {
  const s = await EtcdSession.create({ client, ttlMs });
  sessions.push(s);
  return s;
}
async function boot(metadata: ModuleMetadata): Promise<INestApplicationContext> {
  @Module(metadata)
  class AppModule {}
  const app = await NestFactory.createApplicationContext(AppModule, { logger: false, abortOnError: false });
  apps.push(app);
  return app;
}
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

@Injectable()
class Reports {
  static log: string[] = [];
  @Leader()
  async compile(ms: number, who: string): Promise<{ fence: bigint; aborted: boolean }> {
    const { fence, signal } = currentTerm();
    await sleep(ms);
    Reports.log.push(`${who} finished ${fence}`);
    return { fence, aborted: signal.aborted };
  }
}

describe('tenure/nestjs', () => {
  it('a @Leader() provider runs only in the leading app; app.close() aborts the in-flight call, waits for it, releases the lease: the other app leads at once (well inside the TTL) with a higher fence', async () => {
    const name = `nest/reports-${process.pid}`;
    const [sa, sb] = await Promise.all([session(), session()]);
    const a = await boot({ imports: [TenureModule.forRoot({ candidate: new EtcdElection(sa, name, { id: 'a' }), drainTimeoutMs: 5000 })], providers: [Reports] });
    const la = a.get(LeadershipService);
    const termA = await la.whenElected({ timeoutMs: 10_000 });
    const b = await boot({ imports: [TenureModule.forRoot({ candidateFactory: (election) => new EtcdElection(sb, name, { id: `b-${election}` }) })], providers: [Reports] });
    const lb = b.get(LeadershipService);
    await pollValue(async () => (lb.state === 'campaigning' ? true : undefined), 10_000);
    expect(await b.get(Reports).compile(1, 'b')).toBeUndefined(); // not leading: skipped
    expect(await a.get(Reports).compile(1, 'a')).toEqual({ fence: termA.fence, aborted: false });
    const demoted: DemotionInfo[] = [];
    la.on('demoted', (info) => demoted.push(info));
    lb.on('elected', (ctx) => Reports.log.push(`b elected ${ctx.fence}`));

    const inFlight = a.get(Reports).compile(500, 'a');
    await sleep(50);
    await a.close();
    expect(await inFlight).toEqual({ fence: termA.fence, aborted: true }); // its signal aborted; the close waited for it
    expect(demoted.map((d) => d.reason)).toEqual(['closed']);
    const termB = await lb.whenElected({ timeoutMs: 5000 }); // the TTL is 10 s: only a released lease is this quick
    expect(termB.fence).toBeGreaterThan(termA.fence);
    expect(lb.currentTerm?.fence).toBe(termB.fence);
    expect(lb.isLeader()).toBe(true);
    expect(Reports.log.slice(-2)).toEqual([`a finished ${termA.fence}`, `b elected ${termB.fence}`]); // never two terms at once
    await b.close();
    expect(lb.state).toBe('closed');
  }, 60_000);

  it('several elections by name: the default one by its class, a named one by @InjectLeadership() (from forRootAsync with injected dependencies); @Leader() classes and unnamed methods map to their election', async () => {
    const s = await session(4000);
    const prefix = `nest/multi-${process.pid}`;
    @Injectable()
    @Leader('cleanup')
    class Cleanup {
      readonly log: string[] = [];
      onElected(ctx: TermContext): void {
        this.log.push(`elected ${ctx.fence}`);
      }
      onDemoted(info: DemotionInfo): void {
        this.log.push(`demoted ${info.reason}`);
      }
      @Leader()
      async sweep(): Promise<bigint> {
        return currentTerm().fence;
      }
    }
    @Injectable()
    class Mixed {
      constructor(
        readonly main: LeadershipService, // by its type (emitDecoratorMetadata)
        @InjectLeadership('cleanup') readonly cleanup: LeadershipService,
      ) {}
      @Leader() // no election named, none on the class: the default one
      async main1(): Promise<bigint> {
        return currentTerm().fence;
      }
      @Leader('cleanup')
      async other(): Promise<bigint> {
        return currentTerm().fence;
      }
    }
    @Controller()
    class Admin {
      @Leader('cleanup') // controllers are bound too
      async sweepNow(): Promise<bigint> {
        return currentTerm().fence;
      }
    }
    @Module({ providers: [{ provide: 'PREFIX', useValue: prefix }], exports: ['PREFIX'] })
    class ConfigModule {}
    const app = await boot({
      imports: [
        TenureModule.forRoot({ candidate: new EtcdElection(s, `${prefix}/main`) }),
        TenureModule.forRootAsync({ name: 'cleanup', imports: [ConfigModule], inject: ['PREFIX'], useFactory: (p: string) => ({ candidateFactory: (election: string) => new EtcdElection(s, `${p}/${election}`), drainTimeoutMs: 2000 }) }),
      ],
      providers: [Cleanup, Mixed],
      controllers: [Admin],
    });
    const mixed = app.get(Mixed);
    expect([mixed.main.election, mixed.cleanup.election]).toEqual(['default', 'cleanup']);
    const [main, cleanup] = await Promise.all([mixed.main.whenElected({ timeoutMs: 10_000 }), mixed.cleanup.whenElected({ timeoutMs: 10_000 })]);
    expect(main.fence).not.toBe(cleanup.fence);
    expect(mixed.cleanup.manager.candidate.name).toBe(`${prefix}/cleanup`);
    expect(await mixed.main1()).toBe(main.fence);
    expect(await mixed.other()).toBe(cleanup.fence);
    expect(await app.get(Cleanup).sweep()).toBe(cleanup.fence);
    expect(await app.get(Admin).sweepNow()).toBe(cleanup.fence);
    await pollValue(async () => (app.get(Cleanup).log.length > 0 ? true : undefined), 5000);
    await app.close();
    expect(app.get(Cleanup).log).toEqual([`elected ${cleanup.fence}`, 'demoted closed']);
  }, 60_000);

  it('a @Leader() election no module registers, a request-scoped @Leader() provider, one election registered twice, and bad options fail the application at init (or at forRoot), before any campaign', async () => {
    const s = await session(4000);
    @Injectable()
    class Orphan {
      @Leader('nowhere')
      async run(): Promise<void> {}
    }
    const candidate = () => new EtcdElection(s, `nest/bad-${process.pid}`);
    await expect(boot({ imports: [TenureModule.forRoot({ candidate: candidate() })], providers: [Orphan] })).rejects.toThrow(expect.objectContaining({ field: 'election', message: expect.stringContaining("forRoot({ name: 'nowhere' })") }));
    @Injectable()
    class Unnamed {
      @Leader()
      async run(): Promise<void> {}
    }
    await expect(boot({ imports: [TenureModule.forRoot({ name: 'x', candidate: candidate() })], providers: [Unnamed] })).rejects.toThrow(expect.objectContaining({ field: 'election' }));
    @Injectable({ scope: Scope.REQUEST })
    class PerRequest {
      @Leader()
      async run(): Promise<void> {}
    }
    await expect(boot({ imports: [TenureModule.forRoot({ candidate: candidate() })], providers: [PerRequest] })).rejects.toThrow(expect.objectContaining({ field: 'election', message: expect.stringContaining('request-scoped') }));
    await expect(boot({ imports: [TenureModule.forRoot({ name: 'x', candidate: candidate(), global: false }), TenureModule.forRoot({ name: 'x', candidate: candidate(), global: false })] })).rejects.toThrow(expect.objectContaining({ field: 'name' }));
    expect(() => TenureModule.forRoot({ candidate: candidate(), drainTimeoutMs: -1 })).toThrow(ConfigError);
    await expect(boot({ imports: [TenureModule.forRootAsync({ useFactory: () => ({ candidate: candidate(), drainTimout: 5 }) as never })] })).rejects.toThrow(expect.objectContaining({ field: 'drainTimout' }));
  }, 60_000);

  it('@nestjs/schedule: @Interval/@Timeout handlers with @Leader() (either decorator order) run only in the leading app, with the term\'s fence and signal; a resign hands them to the other app', async () => {
    const name = `nest/jobs-${process.pid}`;
    const runs: { app: string; fence: bigint; aborted: boolean }[] = [];
    const make = (app: string) => {
      @Injectable()
      class Jobs {
        timeouts = 0;
        @Interval('tick', 40)
        @Leader()
        async tick(): Promise<void> {
          const { fence, signal } = currentTerm();
          runs.push({ app, fence, aborted: signal.aborted });
        }
        @Leader()
        @Interval('tock', 40)
        async tock(): Promise<void> {
          const { fence, signal } = currentTerm();
          runs.push({ app, fence, aborted: signal.aborted });
        }
        @Timeout('once', 100)
        @Leader()
        async once(): Promise<void> {
          this.timeouts++;
        }
      }
      return Jobs;
    };
    const [sa, sb] = await Promise.all([session(), session()]);
    const JobsA = make('a');
    const a = await boot({ imports: [ScheduleModule.forRoot(), TenureModule.forRoot({ candidate: new EtcdElection(sa, name, { id: 'a' }) })], providers: [JobsA] });
    const fenceA = (await a.get(LeadershipService).whenElected({ timeoutMs: 10_000 })).fence;
    const JobsB = make('b');
    const b = await boot({ imports: [ScheduleModule.forRoot(), TenureModule.forRoot({ candidate: new EtcdElection(sb, name, { id: 'b' }) })], providers: [JobsB] });
    expect(b.get(SchedulerRegistry).getIntervals().sort()).toEqual(['tick', 'tock']); // the metadata survived @Leader()'s wrapper
    expect(b.get(SchedulerRegistry).getTimeouts()).toEqual(['once']);
    await pollValue(async () => (runs.filter((r) => r.app === 'a').length >= 6 ? true : undefined), 10_000);
    await sleep(200); // b's @Timeout fired (100 ms) while it followed
    expect(b.get(JobsB).timeouts).toBe(0);
    expect(runs.filter((r) => r.app === 'b')).toEqual([]);

    await a.get(LeadershipService).resign({ cooldownMs: 60_000 });
    const fenceB = (await b.get(LeadershipService).whenElected({ timeoutMs: 5000 })).fence;
    const handedOver = runs.length;
    await pollValue(async () => (runs.slice(handedOver).filter((r) => r.app === 'b').length >= 4 ? true : undefined), 10_000);
    const firstB = runs.findIndex((r) => r.app === 'b');
    expect(runs.slice(0, firstB).every((r) => r.app === 'a' && r.fence === fenceA)).toBe(true);
    expect(runs.slice(firstB).every((r) => r.app === 'b' && r.fence === fenceB)).toBe(true); // nothing of a's after b's first run
    expect(fenceB).toBeGreaterThan(fenceA);
    expect(runs.every((r) => !r.aborted)).toBe(true);
    await Promise.all([a.close(), b.close()]);
  }, 60_000);

  it('health: the leader and a follower are up (with Terminus\'s HealthCheckService too); with the store unreachable the follower is down, and up again once it answers', async () => {
    const name = `nest-health-${process.pid}`;
    const redis = (): Redis => {
      const r = new Redis({ port: redisServer.port });
      redises.push(r);
      return r;
    };
    @Injectable()
    class Health {
      constructor(
        @Inject(HealthCheckService) readonly health: HealthCheckService,
        @Inject(LeadershipHealthIndicator) readonly leadership: LeadershipHealthIndicator,
      ) {}
      check() {
        return this.health.check([() => this.leadership.isHealthy('leadership', { timeoutMs: 500 })]);
      }
    }
    const make = (id: string) => boot({ imports: [TerminusModule, TenureModule.forRoot({ candidate: new RedisElection(redis(), name, { id, ttlMs: 2000 }) })], providers: [Health] });
    const a = await make('a');
    const fence = (await a.get(LeadershipService).whenElected({ timeoutMs: 10_000 })).fence;
    const b = await make('b');
    await pollValue(async () => (b.get(LeadershipService).state === 'campaigning' ? true : undefined), 10_000);
    expect(await a.get(LeadershipHealthIndicator).isHealthy()).toEqual({ leadership: { status: 'up', elections: { default: { state: 'leader', status: 'up', fence: String(fence) } } } });
    expect(await b.get(LeadershipHealthIndicator).isHealthy('tenure')).toEqual({ tenure: { status: 'up', elections: { default: { state: 'campaigning', status: 'up', leader: 'a' } } } });
    expect(await b.get(Health).check()).toMatchObject({ status: 'ok', info: { leadership: { status: 'up' } } });

    await redisServer.pause();
    try {
      const down = await b.get(LeadershipHealthIndicator).isHealthy('leadership', { timeoutMs: 300 });
      expect(down.leadership).toMatchObject({ status: 'down', elections: { default: { status: 'down', error: expect.any(String) } } });
      await expect(b.get(Health).check()).rejects.toMatchObject({ status: 503 });
    } finally {
      await redisServer.resume();
    }
    await pollValue(async () => ((await b.get(LeadershipHealthIndicator).isHealthy()).leadership!.status === 'up' ? true : undefined), 15_000);
    await Promise.all([a.close(), b.close()]);
    expect((await b.get(LeadershipHealthIndicator).isHealthy()).leadership).toMatchObject({ status: 'down', elections: { default: { state: 'closed' } } });
  }, 60_000);
});
