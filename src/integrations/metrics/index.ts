/**
 * tenure/metrics: Prometheus metrics for the lifecycle manager and the fenced resources, with
 * prom-client (an optional peer dependency, loaded only by this entry point: importing `tenure`
 * registers nothing and never loads it).
 */
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import type { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { ConfigError } from '../../core/errors.js';
import { STALE_FENCE_CHANNEL, type StaleFenceEvent } from '../../core/fence-events.js';
import { loadPeer } from '../../core/peer.js';
import { optionalString, requireOptions } from '../../core/validate.js';
import type { LeadershipManager } from '../../lifecycle/manager.js';
import type { LeadershipState, TermContext, DemotionInfo } from '../../lifecycle/types.js';

const prom = loadPeer<typeof import('prom-client')>('tenure/metrics', 'prom-client');

/** Options of `new TenureMetrics()`. */
export interface TenureMetricsOptions {
  /** Where the metrics are registered. @default prom-client's global registry */
  registry?: Registry;
  /** Bucket bounds (seconds) of `tenure_campaign_seconds` and `tenure_drain_seconds`. @default [0.005, 0.01, 0.05, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60] */
  buckets?: number[];
}

/** Options of `metrics.instrument(manager)`. */
export interface InstrumentOptions {
  /** The `election` label. @default the candidate's name */
  election?: string;
}

const DEFAULT_BUCKETS = [0.005, 0.01, 0.05, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60];

/**
 * tenure's metrics on one registry:
 * `tenure_is_leader{election}` (1 while a term is live, 0 from the instant its signal aborts),
 * `tenure_terms_total{election}`, `tenure_demotions_total{election,reason,lost_reason}`,
 * `tenure_campaign_seconds{election}` (campaign start to election), `tenure_drain_seconds{election}`,
 * `tenure_fence{election}` (the live or last term's fence, as a float), and
 * `tenure_stale_fence_rejections_total{resource}` (every write any fenced resource in this
 * process refused, from {@link STALE_FENCE_CHANNEL}). Metrics already on the registry under these
 * names are reused, so several instances may share one registry.
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
  readonly #stale: Counter<'resource'>;
  readonly #onStale = (msg: unknown): void => void this.#stale.inc({ resource: (msg as StaleFenceEvent).resource });
  #closed = false;

  constructor(options?: TenureMetricsOptions) {
    const o = requireOptions('options', options);
    const registry = o.registry ?? prom.register;
    if (registry === null || typeof registry !== 'object' || typeof (registry as Registry).getSingleMetric !== 'function' || typeof (registry as Registry).registerMetric !== 'function') {
      throw new ConfigError('registry', 'must be a prom-client Registry');
    }
    const buckets = o.buckets ?? DEFAULT_BUCKETS;
    if (!Array.isArray(buckets) || buckets.length === 0 || buckets.some((b, i) => typeof b !== 'number' || !Number.isFinite(b) || b <= 0 || (i > 0 && b <= buckets[i - 1]!))) {
      throw new ConfigError('buckets', 'must be a non-empty, strictly increasing list of positive numbers of seconds');
    }
    this.registry = registry;
    const reuse = <M>(name: string, make: () => M): M => (registry.getSingleMetric(name) as M | undefined) ?? make();
    const registers = [registry];
    this.#isLeader = reuse('tenure_is_leader', () => new prom.Gauge({ name: 'tenure_is_leader', help: '1 while this process leads the election, else 0', labelNames: ['election'], registers }));
    this.#terms = reuse('tenure_terms_total', () => new prom.Counter({ name: 'tenure_terms_total', help: 'Terms this process has led', labelNames: ['election'], registers }));
    this.#demotions = reuse('tenure_demotions_total', () => new prom.Counter({ name: 'tenure_demotions_total', help: 'Terms ended, by reason (lost, resigned, closed, hook-error, hook-returned) and, when lost, how', labelNames: ['election', 'reason', 'lost_reason'], registers }));
    this.#campaign = reuse('tenure_campaign_seconds', () => new prom.Histogram({ name: 'tenure_campaign_seconds', help: 'Time from the start of a campaign to winning it', labelNames: ['election'], buckets, registers }));
    this.#drain = reuse('tenure_drain_seconds', () => new prom.Histogram({ name: 'tenure_drain_seconds', help: "Time from a term's end to its work settling (the drain)", labelNames: ['election'], buckets, registers }));
    this.#fence = reuse('tenure_fence', () => new prom.Gauge({ name: 'tenure_fence', help: "The fence of this process's live or last term", labelNames: ['election'], registers }));
    this.#stale = reuse('tenure_stale_fence_rejections_total', () => new prom.Counter({ name: 'tenure_stale_fence_rejections_total', help: 'Writes a fenced resource refused for a stale fence', labelNames: ['resource'], registers }));
    subscribe(STALE_FENCE_CHANNEL, this.#onStale);
  }

  /** Records a manager's terms, demotions, campaigns and drains, labelled by election. Returns a function that stops recording. */
  instrument(manager: LeadershipManager, options?: InstrumentOptions): () => void {
    const m = manager as Partial<LeadershipManager> | null;
    if (m === null || typeof m !== 'object' || typeof m.on !== 'function' || typeof m.isLeader !== 'function') throw new ConfigError('manager', 'must be a LeadershipManager');
    const election = optionalString('election', requireOptions('options', options).election, manager.candidate.name, { maxLength: 256 });
    const labels = { election };
    this.#isLeader.set(labels, 0);
    let campaignFrom: number | undefined;
    const onState = (state: LeadershipState): void => {
      if (state === 'campaigning') campaignFrom = performance.now();
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
    manager.on('state', onState).on('elected', onElected).on('demoted', onDemoted);
    return () => void manager.off('state', onState).off('elected', onElected).off('demoted', onDemoted);
  }

  /** Stops counting stale-fence rejections (the metrics stay on the registry). Idempotent. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    unsubscribe(STALE_FENCE_CHANNEL, this.#onStale);
  }
}
