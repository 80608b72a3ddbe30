import type { OnApplicationBootstrap, OnModuleDestroy, OnModuleInit } from '@nestjs/common';
import type { DiscoveryService } from '@nestjs/core';
import { ConfigError } from '../../core/errors.js';
import { bindLeader, leaderElections } from '../../lifecycle/leader.js';
import type { LeadershipManager } from '../../lifecycle/manager.js';
import { common, core } from './nest.js';
import { DEFAULT_ELECTION, LeadershipService } from './service.js';

/**
 * @internal The one place that follows Nest's lifecycle for every election of the application
 * (in the global TenureCoreModule, so it runs once however many elections there are):
 *
 * - `onModuleInit`: finds the elections (the LeadershipService providers) and binds every provider
 *   and controller that uses `@Leader()` to them — before `@nestjs/schedule` starts its timers at
 *   `onApplicationBootstrap`, so a leader-only `@Cron` never runs unbound.
 * - `onApplicationBootstrap`: every election starts campaigning.
 * - `onModuleDestroy` (`app.close()`, or the signal `enableShutdownHooks()` listens for): every
 *   manager closes — the term's signal aborts, its work drains, the lease is released at the store
 *   (the next instance leads at once, not after a TTL), `onDemoted` runs. Nest calls this hook on
 *   a global module after the other modules' `onModuleDestroy` and before any
 *   `beforeApplicationShutdown` / `onApplicationShutdown`: what the work writes to must stay open
 *   until the latter.
 */
@common.Injectable()
export class TenureExplorer implements OnModuleInit, OnApplicationBootstrap, OnModuleDestroy {
  readonly #discovery: DiscoveryService;
  readonly #elections = new Map<string, LeadershipService>();
  readonly #unbind: (() => void)[] = [];

  constructor(@common.Inject(core.DiscoveryService) discovery: DiscoveryService) {
    this.#discovery = discovery;
  }

  /** The application's elections by name. */
  get elections(): ReadonlyMap<string, LeadershipService> {
    return this.#elections;
  }

  onModuleInit(): void {
    const wrappers = [...this.#discovery.getProviders(), ...this.#discovery.getControllers()];
    const seen = new Set<object>();
    for (const w of wrappers) {
      const s: unknown = w.instance;
      if (!(s instanceof LeadershipService) || seen.has(s)) continue;
      seen.add(s);
      if (this.#elections.has(s.election)) throw new ConfigError('name', `two TenureModules register the election '${s.election}': give each forRoot() its own name`);
      this.#elections.set(s.election, s);
    }
    const managers: Record<string, LeadershipManager> = Object.fromEntries([...this.#elections].map(([e, s]) => [e, s.manager]));
    const defaultElection = this.#elections.has(DEFAULT_ELECTION) ? DEFAULT_ELECTION : undefined;
    for (const w of wrappers) {
      const instance: unknown = w.instance;
      if (instance === null || typeof instance !== 'object' || seen.has(instance) || Object.getPrototypeOf(instance) === null) continue;
      seen.add(instance);
      const named = leaderElections(instance, defaultElection);
      if (named.length === 0) continue;
      const what = instance.constructor?.name ?? String(w.name);
      if (!w.isDependencyTreeStatic()) throw new ConfigError('election', `${what} uses @Leader() but is request-scoped (or depends on a request-scoped provider): a leader service must be a singleton`);
      for (const e of named) {
        if (!managers[e]) throw new ConfigError('election', `${what} uses the election '${e}', but no TenureModule.forRoot${e === DEFAULT_ELECTION ? '()' : `({ name: '${e}' })`} is imported`);
      }
      this.#unbind.push(bindLeader(instance, managers, { defaultElection }));
    }
  }

  onApplicationBootstrap(): void {
    for (const s of this.#elections.values()) s.manager.start();
  }

  async onModuleDestroy(): Promise<void> {
    await Promise.all([...this.#elections.values()].map((s) => s.manager.close()));
    for (const unbind of this.#unbind.splice(0)) unbind();
  }
}
