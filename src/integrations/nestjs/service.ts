import type { WaitOptions } from '../../core/options.js';
import { requireString } from '../../core/validate.js';
import type { LeadershipManager } from '../../lifecycle/manager.js';
import type { LeadershipEvents, LeadershipState, TermContext } from '../../lifecycle/types.js';
import { common } from './nest.js';

/** The name of the election a `TenureModule.forRoot()` without `name` registers. */
export const DEFAULT_ELECTION = 'default';

/**
 * One election of the application, injectable: `constructor(private readonly leadership:
 * LeadershipService)` for the default election, `@InjectLeadership('reports')` for a named one. The
 * module starts its campaign at `onApplicationBootstrap` and ends it when the application closes;
 * this is what application code asks and does in between.
 */
export class LeadershipService {
  /** The election's name in this application (`forRoot({ name })`, what `@Leader(name)` refers to). */
  readonly election: string;
  /** The manager behind it, for what this class does not wrap (`every()`, `cron()`, `track()`). */
  readonly manager: LeadershipManager;

  /** @internal made by TenureModule */
  constructor(election: string, manager: LeadershipManager) {
    this.election = election;
    this.manager = manager;
  }

  /** True while this process leads: false from the instant the term's signal aborts. */
  isLeader(): boolean {
    return this.manager.isLeader();
  }

  /** The live term's `{ signal, fence, term, track }`, while leading. */
  get currentTerm(): TermContext | undefined {
    return this.manager.currentTerm;
  }

  /** follower → campaigning → leader → draining → follower … | closed. */
  get state(): LeadershipState {
    return this.manager.state;
  }

  /** Resolves with the term's context once leading (at once when leading now). */
  whenElected(options?: WaitOptions): Promise<TermContext> {
    return this.manager.whenElected(options);
  }

  /** Ends the current term (signal, drain, release, `onDemoted`) and sits out `cooldownMs` so another instance leads next. */
  resign(options?: { cooldownMs?: number }): Promise<void> {
    return this.manager.resign(options);
  }

  /** Adds a listener for one of the manager's typed events (`elected`, `demoted`, `leaderChanged`, `state`, `error`). */
  on<E extends keyof LeadershipEvents>(event: E, listener: LeadershipEvents[E]): this {
    this.manager.on(event, listener as never);
    return this;
  }

  /** Adds a listener called once. */
  once<E extends keyof LeadershipEvents>(event: E, listener: LeadershipEvents[E]): this {
    this.manager.once(event, listener as never);
    return this;
  }

  /** Removes a listener. */
  off<E extends keyof LeadershipEvents>(event: E, listener: LeadershipEvents[E]): this {
    this.manager.off(event, listener as never);
    return this;
  }
}

/**
 * The injection token of an election's {@link LeadershipService}: the class itself for the default
 * election (so plain constructor injection works), a string for a named one.
 */
export function getLeadershipToken(election: string = DEFAULT_ELECTION): typeof LeadershipService | string {
  const name = requireString('election', election, { maxLength: 256 });
  return name === DEFAULT_ELECTION ? LeadershipService : `tenure:LeadershipService:${name}`;
}

/** Injects the {@link LeadershipService} of an election: `constructor(@InjectLeadership('reports') reports: LeadershipService)`. */
export function InjectLeadership(election?: string): PropertyDecorator & ParameterDecorator {
  return common.Inject(getLeadershipToken(election));
}
