/**
 * The Nest application of examples/nestjs: a ledger that only the leader appends to. The election
 * runs on etcd or on Redis (`TenureModule.forRootAsync`, its candidate made from the store's
 * connection); the ledger is a Redis list written through a RedisFencedResource, each append
 * carrying the term's fence. `LedgerJob.append()` is an `@Interval` handler of @nestjs/schedule
 * that `@Leader()` makes leader-only: every instance's timer fires, only the leader's runs.
 */
import { Inject, Injectable, Module, type DynamicModule, type OnApplicationShutdown } from '@nestjs/common';
import { Interval, ScheduleModule } from '@nestjs/schedule';
import { Redis } from 'ioredis';
import { currentTerm, Leader, StaleFenceError, type Candidate, type DemotionInfo, type TermContext } from '../../src/index.js';
import { TenureModule } from '../../src/integrations/nestjs/index.js';
import { EtcdElection, EtcdSession } from '../../src/recipes/etcd/index.js';
import { RedisElection, RedisFencedResource } from '../../src/recipes/redis/index.js';

/** How the instance is configured (from the command line, in main.ts). */
export interface LedgerConfig {
  backend: 'etcd' | 'redis';
  /** The election's store: an etcd endpoint, or a Redis URL. */
  store: string;
  /** The Redis URL of the ledger. */
  ledger: string;
  name: string;
  id: string;
  ttlMs: number;
  say: (event: string, data?: Record<string, unknown>) => void;
}
const CONFIG = 'LEDGER_CONFIG';
const CONNECTIONS = 'LEDGER_CONNECTIONS';

/** The store connections, opened once and closed last (onApplicationShutdown: after the term has drained and released its lease). */
class Connections implements OnApplicationShutdown {
  private constructor(
    private readonly config: LedgerConfig,
    readonly redis: Redis,
    /** The election's connection: an etcd session, or a Redis client. */
    readonly store: EtcdSession | Redis,
  ) {}

  static async open(config: LedgerConfig): Promise<Connections> {
    const redis = new Redis(config.ledger, { maxRetriesPerRequest: 1 });
    const store = config.backend === 'etcd' ? await EtcdSession.create({ hosts: [config.store], ttlMs: config.ttlMs }) : new Redis(config.store);
    return new Connections(config, redis, store);
  }

  candidate(election: string): Candidate {
    const { name, id, ttlMs } = this.config;
    return this.store instanceof EtcdSession ? new EtcdElection(this.store, `elections/${name}/${election}`, { id }) : new RedisElection(this.store, `elections:${name}:${election}`, { id, ttlMs });
  }

  async onApplicationShutdown(): Promise<void> {
    if (this.store instanceof EtcdSession) await this.store.close();
    else this.store.disconnect();
    this.redis.disconnect();
    this.config.say('stopped');
  }
}

/** The leader-only job: its class names the election, so its hooks follow the terms and its `@Leader()` methods run only while leading. */
@Injectable()
@Leader('ledger')
class LedgerJob {
  readonly #ledger: RedisFencedResource;
  #n = 0;

  constructor(
    @Inject(CONFIG) private readonly config: LedgerConfig,
    @Inject(CONNECTIONS) connections: Connections,
  ) {
    this.#ledger = new RedisFencedResource(connections.redis, `ledger:${config.name}:fence`);
  }

  onElected({ fence }: TermContext): void {
    this.config.say('elected', { fence: String(fence) });
  }

  onDemoted({ reason, fence }: DemotionInfo): void {
    this.config.say('demoted', { reason, fence: String(fence) });
  }

  @Interval(200)
  @Leader()
  async append(): Promise<void> {
    const { fence } = currentTerm(); // the term this run belongs to (its signal too)
    const n = ++this.#n;
    // Prepare the entry (a wait stands in for the work). A run in flight when the term ends is
    // drained: the lease is released only after it has written (or failed), so its write still
    // carries the highest fence.
    await new Promise((r) => setTimeout(r, 100));
    const { id, name } = this.config;
    try {
      await this.#ledger.write(fence, (w) => w.rpush(`ledger:${name}:entries`, `${id} ${fence} ${n}`));
      this.config.say('wrote', { n, fence: String(fence) });
    } catch (e) {
      if (!(e instanceof StaleFenceError)) throw e;
      this.config.say('refused', { n, fence: String(fence), highest: String(e.highest) });
    }
  }
}

@Module({})
export class AppModule {
  static forRoot(config: LedgerConfig): DynamicModule {
    @Module({ providers: [{ provide: CONFIG, useValue: config }, { provide: CONNECTIONS, useFactory: () => Connections.open(config) }], exports: [CONFIG, CONNECTIONS] })
    class StoreModule {}
    return {
      module: AppModule,
      imports: [
        StoreModule,
        ScheduleModule.forRoot(),
        TenureModule.forRootAsync({
          name: 'ledger',
          imports: [StoreModule],
          inject: [CONNECTIONS],
          useFactory: (connections: Connections) => ({ candidateFactory: (election: string) => connections.candidate(election), drainTimeoutMs: 5000 }),
        }),
      ],
      providers: [LedgerJob],
    };
  }
}
