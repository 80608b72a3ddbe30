/**
 * tenure/inversify: `@Leader()` services in an inversify container (inversify 7 or 8, an optional
 * peer dependency). Uses TypeScript's `experimentalDecorators`, as inversify itself does.
 */
import { ContainerModule, type Newable } from 'inversify';
import type { Candidate } from '../../core/candidate.js';
import { ConfigError } from '../../core/errors.js';
import { requireFunction, requireOptions, requireString } from '../../core/validate.js';
import { bindLeader, leaderElections } from '../../lifecycle/leader.js';
import { LeadershipManager, MANAGER_KEYS, type LeadershipManagerOptions } from '../../lifecycle/manager.js';

/** A class the container can construct. */
export type ServiceClass = Newable<object>;

/** Options of `leadershipModule()`: where candidates come from, which services and elections to bind, the managers' options. */
export interface LeadershipModuleOptions {
  /** Makes the candidate of an election, once, when its manager is first resolved (create the store's session before loading the module). */
  candidate: (election: string) => Candidate;
  /** `@Leader()` service classes to bind (singleton scope) and wire to their managers when the container activates them. @default [] */
  services?: ServiceClass[];
  /** Elections to bind a manager for besides those the services name (for `manager.cron()` and the like). @default [] */
  elections?: string[];
  /** Options of every manager. @default {} */
  manager?: LeadershipManagerOptions;
}

/** The service identifier the LeadershipManager of `election` is bound under: `container.get(leadershipManagerId('reports'))`. */
export function leadershipManagerId(election: string): symbol {
  return Symbol.for(`tenure:LeadershipManager:${requireString('election', election, { maxLength: 256 })}`);
}

/**
 * A ContainerModule that binds one LeadershipManager per election (singleton, under
 * {@link leadershipManagerId}) from your candidate factory, and your `@Leader()` services. When
 * the container first resolves a manager (directly or through a service) it starts campaigning;
 * when it activates a service it binds it to its managers (`bindLeader`: its `onElected` /
 * `onDemoted` follow the terms, its `@Leader()` methods run only while leading). Unbinding or
 * unloading (`container.unbindAllAsync()`, `container.unloadAsync(module)`) closes each manager:
 * its term's signal aborts, its work drains, its lease is released.
 *
 * ```ts
 * await container.loadAsync(leadershipModule({ candidate: (e) => new EtcdElection(session, e), services: [ReportService] }));
 * container.get(ReportService); // campaigning; nightly() runs on the leader only
 * await container.unbindAllAsync(); // resign + drain
 * ```
 */
export function leadershipModule(options: LeadershipModuleOptions): ContainerModule {
  const o = requireOptions('options', options, { candidate: true, services: true, elections: true, manager: true });
  const candidate = requireFunction<(election: string) => Candidate>('candidate', o.candidate);
  const services = o.services ?? [];
  if (!Array.isArray(services) || services.some((s) => typeof s !== 'function')) throw new ConfigError('services', 'must be a list of @Leader() service classes');
  const extra = o.elections ?? [];
  if (!Array.isArray(extra)) throw new ConfigError('elections', 'must be a list of election names');
  const managerOptions = requireOptions('manager', o.manager, MANAGER_KEYS);
  const elections = new Set<string>();
  for (const e of extra) elections.add(requireString('elections', e, { maxLength: 256 }));
  for (const s of services) {
    const named = leaderElections(s);
    if (named.length === 0) throw new ConfigError('services', `${s.name} uses no @Leader() election`);
    for (const e of named) elections.add(e);
  }
  return new ContainerModule(({ bind, onActivation, onDeactivation }) => {
    for (const election of elections) {
      const id = leadershipManagerId(election);
      // On the binding, not the container: inversify 8.2 does not await a container-level
      // deactivation's promise in unbindAllAsync/unloadAsync, so the drain would be cut short.
      bind<LeadershipManager>(id)
        .toDynamicValue(() => new LeadershipManager(candidate(election), managerOptions).start())
        .inSingletonScope()
        .onDeactivation((manager) => manager.close());
    }
    for (const service of services) {
      const unbind = new WeakMap<object, () => void>();
      bind(service).toSelf().inSingletonScope();
      onActivation<object>(service, (ctx, instance) => {
        const managers = Object.fromEntries(leaderElections(instance).map((e) => [e, ctx.get<LeadershipManager>(leadershipManagerId(e))]));
        unbind.set(instance, bindLeader(instance, managers));
        return instance;
      });
      onDeactivation<object>(service, (instance) => unbind.get(instance)?.());
    }
  });
}
