import type { DynamicModule, InjectionToken, ModuleMetadata, OptionalFactoryDependency, Provider } from '@nestjs/common';
import type { Candidate } from '../../core/candidate.js';
import { ConfigError } from '../../core/errors.js';
import { optionalBoolean, optionalString, requireFunction, requireOptions, type OptionKeys } from '../../core/validate.js';
import { LeadershipManager, managerSettings, MANAGER_KEYS, type LeadershipManagerOptions } from '../../lifecycle/manager.js';
import { TenureExplorer } from './explorer.js';
import { LeadershipHealthIndicator } from './health.js';
import { common, core } from './nest.js';
import { DEFAULT_ELECTION, getLeadershipToken, LeadershipService } from './service.js';

/** What an election is made of: its candidate (or how to make it) and its manager's options. */
export interface TenureElectionOptions extends LeadershipManagerOptions {
  /** The candidate to campaign with (any backend's: `new EtcdElection(session, 'reports')`). Give this or `candidateFactory`. */
  candidate?: Candidate;
  /** Makes the candidate, with the election's name, when Nest creates the module's providers (e.g. after opening a session). */
  candidateFactory?: (election: string) => Candidate | Promise<Candidate>;
}

/** Options of `TenureModule.forRoot()`: an election's name and scope, its candidate and its manager's options. */
export interface TenureModuleOptions extends TenureElectionOptions {
  /**
   * The election's name in this application: what `@Leader(name)`, `@InjectLeadership(name)` and
   * the candidate factory get. The default election's LeadershipService is injected by its class,
   * and a `@Leader()` method that names no election belongs to it. @default 'default'
   */
  name?: string;
  /** Its LeadershipService can be injected in every module (else only in the module that imports this one). @default true */
  global?: boolean;
}

/** Options of `TenureModule.forRootAsync()`: the election's options from a factory with injected dependencies (a ConfigService, a session). */
export interface TenureModuleAsyncOptions {
  /** As in {@link TenureModuleOptions.name}. @default 'default' */
  name?: string;
  /** As in {@link TenureModuleOptions.global}. @default true */
  global?: boolean;
  /** Modules whose providers the factory injects. @default [] */
  imports?: ModuleMetadata['imports'];
  /** The providers passed to `useFactory`, in order. @default [] */
  inject?: (InjectionToken | OptionalFactoryDependency)[];
  /** Returns the election's candidate (or candidate factory) and manager options. */
  useFactory: (...args: never[]) => TenureElectionOptions | Promise<TenureElectionOptions>;
}

const ELECTION_KEYS: OptionKeys<TenureElectionOptions> = { ...MANAGER_KEYS, candidate: true, candidateFactory: true };
const MODULE_KEYS: OptionKeys<TenureModuleOptions> = { ...ELECTION_KEYS, name: true, global: true };
const ASYNC_KEYS: OptionKeys<TenureModuleAsyncOptions> = { name: true, global: true, imports: true, inject: true, useFactory: true };

/** Validates an election's options (everything but the candidate's own work) before any I/O. */
function checkElection(options: TenureElectionOptions, election: string): TenureElectionOptions {
  const o = requireOptions('options', options, ELECTION_KEYS);
  if ((o.candidate === undefined) === (o.candidateFactory === undefined)) throw new ConfigError('candidate', 'give exactly one of candidate and candidateFactory');
  if (o.candidateFactory !== undefined) requireFunction('candidateFactory', o.candidateFactory);
  else if (o.candidate === null || typeof o.candidate !== 'object' || typeof o.candidate.campaign !== 'function') throw new ConfigError('candidate', 'must be a Candidate (campaign, resign, leader, observe, close, id)');
  const { candidate: _c, candidateFactory: _f, ...manager } = o;
  managerSettings(manager, { election });
  return o;
}

async function makeService(election: string, options: TenureElectionOptions): Promise<LeadershipService> {
  const { candidate, candidateFactory, ...manager } = checkElection(options, election);
  const c = candidate ?? (await candidateFactory!(election));
  return new LeadershipService(election, new LeadershipManager(c, manager));
}

/**
 * @internal The global module behind every TenureModule (imported once however many elections there are):
 * it follows Nest's lifecycle for all of them (TenureExplorer) and provides the health indicator.
 */
@common.Global()
@common.Module({ imports: [core.DiscoveryModule], providers: [TenureExplorer, LeadershipHealthIndicator], exports: [LeadershipHealthIndicator] })
export class TenureCoreModule {}

/**
 * Leader election for a Nest application: one `forRoot()` (or `forRootAsync()`) per election.
 * Each provides a {@link LeadershipService}; every provider or controller that uses `@Leader()` is
 * bound to its election(s), so a `@Leader()` method — a `@Cron`, `@Interval` or `@Timeout`
 * handler of `@nestjs/schedule` too — runs only while this instance leads, as work of the term
 * (`currentTerm()` gives its signal and fence), and a `@Leader('name')` class's `onElected` /
 * `onDemoted` follow the terms. Campaigning starts at `onApplicationBootstrap`; `app.close()` (or
 * the signal of `enableShutdownHooks()`) ends the term: signal, drain, release, `onDemoted`.
 *
 * ```ts
 * @Module({ imports: [TenureModule.forRoot({ candidateFactory: (name) => new EtcdElection(session, `app/${name}`) })], providers: [ReportJob] })
 * class AppModule {}
 * ```
 */
@common.Module({})
export class TenureModule {
  /** One election from options known up front. */
  static forRoot(options: TenureModuleOptions): DynamicModule {
    const o = requireOptions('options', options, MODULE_KEYS);
    const { name: _n, global: _g, ...election } = o;
    const name = optionalString('name', o.name, DEFAULT_ELECTION, { maxLength: 256 });
    checkElection(election, name);
    const token = getLeadershipToken(name);
    return electionModule(name, optionalBoolean('global', o.global, true), [], { provide: token, useFactory: () => makeService(name, election) });
  }

  /** One election whose options come from a factory: `forRootAsync({ imports: [ConfigModule], inject: [ConfigService], useFactory: (config) => ({ candidate: … }) })`. */
  static forRootAsync(options: TenureModuleAsyncOptions): DynamicModule {
    const o = requireOptions('options', options, ASYNC_KEYS);
    const name = optionalString('name', o.name, DEFAULT_ELECTION, { maxLength: 256 });
    const useFactory = requireFunction<(...args: unknown[]) => TenureElectionOptions | Promise<TenureElectionOptions>>('useFactory', o.useFactory);
    if (o.imports !== undefined && !Array.isArray(o.imports)) throw new ConfigError('imports', 'must be a list of modules');
    if (o.inject !== undefined && !Array.isArray(o.inject)) throw new ConfigError('inject', 'must be a list of injection tokens');
    const token = getLeadershipToken(name);
    return electionModule(name, optionalBoolean('global', o.global, true), o.imports ?? [], {
      provide: token,
      useFactory: async (...deps: unknown[]) => makeService(name, await useFactory(...deps)),
      inject: o.inject ?? [],
    });
  }
}

function electionModule(name: string, global: boolean, imports: NonNullable<ModuleMetadata['imports']>, service: Provider): DynamicModule {
  return { module: TenureModule, global, imports: [TenureCoreModule, ...imports], providers: [service], exports: [getLeadershipToken(name)] };
}
