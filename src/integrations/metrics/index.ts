/**
 * tenure/metrics: Prometheus metrics for the lifecycle manager and the fenced resources, with
 * prom-client (an optional peer dependency, loaded only by this entry point: importing `tenure`
 * registers nothing and never loads it).
 */
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import prom, { type Counter, type Gauge, type Histogram, type Registry } from 'prom-client';
import { ConfigError } from '../../core/errors.js';
import { STALE_FENCE_CHANNEL, type StaleFenceEvent } from '../../core/fence-events.js';
import { optionalString, requireOptions } from '../../core/validate.js';
import type { LeadershipManager } from '../../lifecycle/manager.js';
import type { ShardManager } from '../../lifecycle/shards.js';
import type { LeaderInfo } from '../../core/candidate.js';
import type { LeaseLostReason, TermEndReason } from '../../core/errors.js';
import type { LeadershipState, TermContext, DemotionInfo } from '../../lifecycle/types.js';

/** Options of `new TenureMetrics()`. */
export interface TenureMetricsOptions {
  /** Where the metrics are registered. @default prom-client's global registry */
  registry?: Registry;
  /** Bucket bounds (seconds) of `tenure_campaign_seconds` and `tenure_drain_seconds`. @default [0.005, 0.01, 0.05, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60] */
  buckets?: number[];
}

/** Options of `metrics.instrumentShards(shardManager)`. */
export interface InstrumentShardsOptions {
  /** The `group` label. @default the membership's group */
  group?: string;
}

/** Options of `metrics.instrument(manager)`. */
export interface InstrumentOptions {
  /** The `election` label. @default the candidate's name */
  election?: string;
}

const DEFAULT_BUCKETS = [0.005, 0.01, 0.05, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60];

// Every label value a demotion can carry, so each series exists (at 0) from registration: a
// counter that appears only at its first event makes `increase()` miss that event. The records
// are typed so a new reason is a compile error here until it is listed.
const END_REASONS = Object.keys({ lost: 1, resigned: 1, closed: 1, 'hook-error': 1, 'hook-returned': 1 } satisfies Record<TermEndReason, 1>) as TermEndReason[];
const LOST_REASONS = Object.keys({ released: 1, deadline: 1, expired: 1, suspended: 1, 'session-lost': 1, 'renew-failed': 1, closed: 1, 'connection-lost': 1 } satisfies Record<LeaseLostReason, 1>);

// `tenure_lease_remaining_seconds` is read at scrape time from each instrumented manager's live
// term; several TenureMetrics may share a registry (and so one gauge), hence one map per registry.
const leaseSources = new WeakMap<Registry, Map<string, () => number>>();

/**
 * tenure's metrics on one registry:
 * `tenure_is_leader{election}` (1 while a term is live, 0 from the instant its signal aborts),
 * `tenure_terms_total{election}`, `tenure_demotions_total{election,reason,lost_reason}`,
 * `tenure_campaign_seconds{election}` (campaign start to election), `tenure_drain_seconds{election}`,
 * `tenure_fence{election}` (the live or last term's fence, as a float; 0 before the first term),
 * `tenure_campaigning{election}` (1 while campaigning), `tenure_lease_remaining_seconds{election}`
 * (the live term's lease time left on the local deadline, read at scrape; 0 when not leading),
 * `tenure_observed_leader{election,leader}` (1 on the leader id the manager last observed —
 * `leader=""` while nobody leads or before the first observation; needs `observeLeader`), and
 * `tenure_stale_fence_rejections_total{resource}` (every write any fenced resource in this
 * process refused, from {@link STALE_FENCE_CHANNEL}). Every series whose labels are known up
 * front exists from `instrument()` on, at 0 (`tenure_terms_total`, each demotion reason, the
 * histograms), so a fresh process that has never led is scraped whole and `increase()` sees its
 * first term; only a stale-fence series, labelled by a resource named at its first refusal,
 * appears then. For a ShardManager (`instrumentShards`):
 * `tenure_shards_held{group}`, `tenure_shards_assigned{group}`,
 * `tenure_shard_moves_total{group,direction}` (`in`: assigned here from another member, `out`:
 * assigned away to another) and `tenure_shard_handoff_seconds{group}` (from a shard's move here to its term
 * here: the old owner's drain and release, or its lease's expiry). Metrics already on the registry
 * under these names are reused, so several instances may share one registry.
 *
 * ```ts
 * const metrics = new TenureMetrics({ registry });
 * metrics.instrument(manager);
 * ```
 */
export class TenureMetrics {
  /** The prom-client registry the metrics are registered on (scrape it, or merge it into yours). */
  readonly registry: Registry;
  readonly #isLeader: Gauge<'election'>;
  readonly #terms: Counter<'election'>;
  readonly #demotions: Counter<'election' | 'reason' | 'lost_reason'>;
  readonly #campaign: Histogram<'election'>;
  readonly #drain: Histogram<'election'>;
  readonly #fence: Gauge<'election'>;
  readonly #campaigning: Gauge<'election'>;
  readonly #observed: Gauge<'election' | 'leader'>;
  readonly #stale: Counter<'resource'>;
  readonly #onStale = (msg: unknown): void => void this.#stale.inc({ resource: (msg as StaleFenceEvent).resource });
  readonly #buckets: number[];
  #shardMetrics: { held: Gauge<'group'>; assigned: Gauge<'group'>; moves: Counter<'group' | 'direction'>; handoff: Histogram<'group'> } | undefined;
  #closed = false;

  constructor(options?: TenureMetricsOptions) {
    const o = requireOptions('options', options, { registry: true, buckets: true });
    const registry = o.registry ?? prom.register;
    if (registry === null || typeof registry !== 'object' || typeof (registry as Registry).getSingleMetric !== 'function' || typeof (registry as Registry).registerMetric !== 'function') {
      throw new ConfigError('registry', 'must be a prom-client Registry');
    }
    const buckets = o.buckets ?? DEFAULT_BUCKETS;
    if (!Array.isArray(buckets) || buckets.length === 0 || buckets.some((b, i) => typeof b !== 'number' || !Number.isFinite(b) || b <= 0 || (i > 0 && b <= buckets[i - 1]!))) {
      throw new ConfigError('buckets', 'must be a non-empty, strictly increasing list of positive numbers of seconds');
    }
    this.registry = registry;
    this.#buckets = buckets;
    const reuse = <M>(name: string, make: () => M): M => (registry.getSingleMetric(name) as M | undefined) ?? make();
    const registers = [registry];
    this.#isLeader = reuse('tenure_is_leader', () => new prom.Gauge({ name: 'tenure_is_leader', help: '1 while this process leads the election, else 0', labelNames: ['election'], registers }));
    this.#terms = reuse('tenure_terms_total', () => new prom.Counter({ name: 'tenure_terms_total', help: 'Terms this process has led', labelNames: ['election'], registers }));
    this.#demotions = reuse('tenure_demotions_total', () => new prom.Counter({ name: 'tenure_demotions_total', help: 'Terms ended, by reason (lost, resigned, closed, hook-error, hook-returned) and, when lost, how', labelNames: ['election', 'reason', 'lost_reason'], registers }));
    this.#campaign = reuse('tenure_campaign_seconds', () => new prom.Histogram({ name: 'tenure_campaign_seconds', help: 'Time from the start of a campaign to winning it', labelNames: ['election'], buckets, registers }));
    this.#drain = reuse('tenure_drain_seconds', () => new prom.Histogram({ name: 'tenure_drain_seconds', help: "Time from a term's end to its work settling (the drain)", labelNames: ['election'], buckets, registers }));
    this.#fence = reuse('tenure_fence', () => new prom.Gauge({ name: 'tenure_fence', help: "The fence of this process's live or last term", labelNames: ['election'], registers }));
    this.#campaigning = reuse('tenure_campaigning', () => new prom.Gauge({ name: 'tenure_campaigning', help: '1 while this process campaigns for the election, else 0', labelNames: ['election'], registers }));
    if (!leaseSources.has(registry)) leaseSources.set(registry, new Map());
    const sources = leaseSources.get(registry)!;
    reuse('tenure_lease_remaining_seconds', () => new prom.Gauge({
      name: 'tenure_lease_remaining_seconds',
      help: "Time left on the live term's lease (its local deadline), 0 when not leading",
      labelNames: ['election'],
      registers,
      collect(this: Gauge<'election'>) {
        for (const [election, remainingMs] of sources) this.set({ election }, remainingMs() / 1000);
      },
    }));
    this.#observed = reuse('tenure_observed_leader', () => new prom.Gauge({ name: 'tenure_observed_leader', help: 'The leader this process last observed (1 on its id; leader="" while nobody leads)', labelNames: ['election', 'leader'], registers }));
    this.#stale = reuse('tenure_stale_fence_rejections_total', () => new prom.Counter({ name: 'tenure_stale_fence_rejections_total', help: 'Writes a fenced resource refused for a stale fence', labelNames: ['resource'], registers }));
    subscribe(STALE_FENCE_CHANNEL, this.#onStale);
  }

  /** Records a manager's terms, demotions, campaigns and drains, labelled by election. Returns a function that stops recording. */
  instrument(manager: LeadershipManager, options?: InstrumentOptions): () => void {
    const m = manager as Partial<LeadershipManager> | null;
    if (m === null || typeof m !== 'object' || typeof m.on !== 'function' || typeof m.isLeader !== 'function') throw new ConfigError('manager', 'must be a LeadershipManager');
    const election = optionalString('election', requireOptions('options', options, { election: true }).election, manager.candidate.name, { maxLength: 256 });
    const labels = { election };
    this.#isLeader.set(labels, 0);
    this.#terms.inc(labels, 0);
    this.#fence.set(labels, 0);
    this.#campaign.zero(labels);
    this.#drain.zero(labels);
    for (const reason of END_REASONS) {
      for (const lost of reason === 'lost' ? LOST_REASONS : ['']) this.#demotions.inc({ election, reason, lost_reason: lost }, 0);
    }
    this.#campaigning.set(labels, manager.state === 'campaigning' ? 1 : 0);
    let observed = '';
    this.#observed.set({ election, leader: observed }, 1);
    const onLeader = (leader: LeaderInfo | undefined): void => {
      const id = leader?.id ?? '';
      if (id === observed) return;
      this.#observed.remove({ election, leader: observed });
      observed = id;
      this.#observed.set({ election, leader: id }, 1);
    };
    const sources = leaseSources.get(this.registry)!;
    const remaining = (): number => Math.max(0, manager.currentTerm?.term.remainingMs() ?? 0);
    sources.set(election, remaining);
    let campaignFrom: number | undefined;
    const onState = (state: LeadershipState): void => {
      if (state === 'campaigning') campaignFrom = performance.now();
      this.#campaigning.set(labels, state === 'campaigning' ? 1 : 0);
    };
    const onElected = (ctx: TermContext): void => {
      if (campaignFrom !== undefined) this.#campaign.observe(labels, (performance.now() - campaignFrom) / 1000);
      campaignFrom = undefined;
      this.#terms.inc(labels);
      this.#fence.set(labels, Number(ctx.fence));
      this.#isLeader.set(labels, 1);
      ctx.signal.addEventListener('abort', () => this.#isLeader.set(labels, 0), { once: true });
    };
    const onDemoted = (info: DemotionInfo): void => {
      this.#demotions.inc({ election, reason: info.reason, lost_reason: info.lostReason ?? '' });
      this.#drain.observe(labels, info.drainedMs / 1000);
    };
    const now = manager.currentTerm;
    if (now) {
      this.#fence.set(labels, Number(now.fence));
      this.#isLeader.set(labels, 1);
      now.signal.addEventListener('abort', () => this.#isLeader.set(labels, 0), { once: true });
    }
    manager.on('state', onState).on('elected', onElected).on('demoted', onDemoted).on('leaderChanged', onLeader);
    return () => {
      if (sources.get(election) === remaining) sources.delete(election);
      manager.off('state', onState).off('elected', onElected).off('demoted', onDemoted).off('leaderChanged', onLeader);
    };
  }

  /** Records a ShardManager's held and assigned shards, moves and hand-off times, labelled by group. Returns a function that stops recording. */
  instrumentShards(shards: ShardManager, options?: InstrumentShardsOptions): () => void {
    const sm = shards as Partial<ShardManager> | null;
    if (sm === null || typeof sm !== 'object' || typeof sm.on !== 'function' || typeof sm.held !== 'function') throw new ConfigError('shards', 'must be a ShardManager');
    const group = optionalString('group', requireOptions('options', options, { group: true }).group, shards.membership.group, { maxLength: 256 });
    const m = (this.#shardMetrics ??= this.#makeShardMetrics());
    const labels = { group };
    const sync = (): void => {
      m.held.set(labels, shards.held().length);
      m.assigned.set(labels, shards.assigned.length);
    };
    const onAcquired = (_shard: number, ctx: TermContext, info: { waitedMs: number; from: string | undefined }): void => {
      if (info.from !== undefined) m.handoff.observe(labels, info.waitedMs / 1000);
      sync();
      ctx.signal.addEventListener('abort', sync, { once: true });
    };
    const onAssigned = (_s: readonly number[], change: { moved: readonly number[]; removed: readonly number[] }): void => {
      m.moves.inc({ group, direction: 'in' }, change.moved.length);
      m.moves.inc({ group, direction: 'out' }, change.removed.length);
      sync();
    };
    m.moves.inc({ group, direction: 'in' }, 0);
    m.moves.inc({ group, direction: 'out' }, 0);
    m.handoff.zero(labels);
    sync();
    shards.on('shardAcquired', onAcquired).on('shardReleased', sync).on('assigned', onAssigned);
    return () => void shards.off('shardAcquired', onAcquired).off('shardReleased', sync).off('assigned', onAssigned);
  }

  #makeShardMetrics() {
    const registry = this.registry;
    const registers = [registry];
    const reuse = <M>(name: string, make: () => M): M => (registry.getSingleMetric(name) as M | undefined) ?? make();
    return {
      held: reuse('tenure_shards_held', () => new prom.Gauge({ name: 'tenure_shards_held', help: 'Shards whose term is live in this process', labelNames: ['group'], registers })),
      assigned: reuse('tenure_shards_assigned', () => new prom.Gauge({ name: 'tenure_shards_assigned', help: 'Shards assigned to this member by the live set it last saw', labelNames: ['group'], registers })),
      moves: reuse('tenure_shard_moves_total', () => new prom.Counter({ name: 'tenure_shard_moves_total', help: 'Shards moved here (in) or away (out) by a membership change', labelNames: ['group', 'direction'], registers })),
      handoff: reuse('tenure_shard_handoff_seconds', () => new prom.Histogram({ name: 'tenure_shard_handoff_seconds', help: "Time from a shard's move to this member to its term here", labelNames: ['group'], buckets: this.#buckets, registers })),
    };
  }

  /** Stops counting stale-fence rejections (the metrics stay on the registry). Idempotent. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    unsubscribe(STALE_FENCE_CHANNEL, this.#onStale);
  }
}
