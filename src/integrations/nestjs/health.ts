import { ConfigError } from '../../core/errors.js';
import { optionalNumber, requireOptions, requireString } from '../../core/validate.js';
import { common } from './nest.js';
import { TenureExplorer } from './explorer.js';

/** Options of {@link LeadershipHealthIndicator.isHealthy}. */
export interface LeadershipHealthOptions {
  /** The elections to report on. @default every election of the application */
  elections?: string[];
  /** Bound on the store read that checks a non-leader's store in ms: past it the election is down. @default 1000 */
  timeoutMs?: number;
}

/** One election's details in a health result. */
export interface ElectionHealth {
  /** The manager's state: `leader`, `follower`, `campaigning`, `draining` or `closed`. */
  readonly state: string;
  /** `up` or `down`. */
  readonly status: 'up' | 'down';
  /** The leading instance's id as the store shows it (null when nobody leads), for a non-leader whose store answered. */
  readonly leader?: string | null;
  /** The term's fence (a decimal string), while this instance leads. */
  readonly fence?: string;
  /** Why it is down. */
  readonly error?: string;
}

/** A health result in Terminus's shape (`HealthIndicatorResult`): `{ [key]: { status, elections } }`. */
export type LeadershipHealthResult = Record<
  string,
  {
    /** `up` when every election reported is. */
    status: 'up' | 'down';
    /** Each election's details, by name. */
    elections: Record<string, ElectionHealth>;
  }
>;

/**
 * A `@nestjs/terminus` health indicator for the application's elections (it needs nothing from
 * Terminus: it returns Terminus's result shape, and `HealthCheckService.check()` reports a `down`
 * one as an error). An election is up when this instance leads (its lease is live: the session
 * keeps it so, or the term would have ended) or when its store answers a read of who leads within
 * `timeoutMs` — a follower is healthy. It is down when the store does not answer (the session is
 * lost: this instance could not lead if it had to) or the election is closed.
 *
 * ```ts
 * @Get('health') @HealthCheck()
 * check() { return this.health.check([() => this.leadership.isHealthy('leadership')]); }
 * ```
 */
@common.Injectable()
export class LeadershipHealthIndicator {
  readonly #explorer: TenureExplorer;

  /** @internal made by Nest */
  constructor(@common.Inject(TenureExplorer) explorer: TenureExplorer) {
    this.#explorer = explorer;
  }

  /** Checks the elections and returns `{ [key]: { status, elections: { [name]: ElectionHealth } } }`: up only when every election is. */
  async isHealthy(key = 'leadership', options?: LeadershipHealthOptions): Promise<LeadershipHealthResult> {
    requireString('key', key, { maxLength: 256 });
    const o = requireOptions('options', options, { elections: true, timeoutMs: true });
    const timeoutMs = optionalNumber('timeoutMs', o.timeoutMs, 1000, { integer: true, min: 1, max: 2 ** 31 - 1 });
    const all = this.#explorer.elections;
    if (o.elections !== undefined && (!Array.isArray(o.elections) || o.elections.length === 0)) throw new ConfigError('elections', 'must be a non-empty list of election names');
    const names = o.elections ?? [...all.keys()];
    for (const n of names) if (!all.has(requireString('elections', n, { maxLength: 256 }))) throw new ConfigError('elections', `no election '${n}' in this application (it has ${[...all.keys()].map((k) => `'${k}'`).join(', ') || 'none'})`);
    const entries = await Promise.all(
      names.map(async (name): Promise<[string, ElectionHealth]> => {
        const m = all.get(name)!.manager;
        const term = m.currentTerm;
        if (term) return [name, { state: 'leader', status: 'up', fence: String(term.fence) }];
        if (m.state === 'closed') return [name, { state: 'closed', status: 'down', error: 'the election is closed' }];
        const state = m.state;
        try {
          const leader = await m.candidate.leader({ timeoutMs });
          return [name, { state, status: 'up', leader: leader?.id ?? null }];
        } catch (e) {
          return [name, { state, status: 'down', error: e instanceof Error ? e.message : String(e) }];
        }
      }),
    );
    const elections = Object.fromEntries(entries);
    return { [key]: { status: entries.every(([, h]) => h.status === 'up') ? 'up' : 'down', elections } };
  }
}
