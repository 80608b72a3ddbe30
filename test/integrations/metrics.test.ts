import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { InMemoryFencedResource, LeadershipManager, ShardManager, StaleFenceError } from '../../src/index.js';
import { TenureMetrics } from '../../src/integrations/metrics/index.js';
import { RedisElection, RedisFencedResource, RedisMembership } from '../../src/recipes/redis/index.js';
import { redisManagers } from '../helpers/managers.js';
import { pollValue } from '../helpers/wait.js';

/**
 * tenure/metrics (issue 11) on a real Redis: two managers, each with its own registry as two
 * processes would have; the leader's lease is deleted from outside (it is demoted, lost), the
 * other takes over; its late write is refused by the fenced resources. The scrapes show both
 * terms, the demotion and its reason, the fences and the refusals.
 */
const root = fileURLToPath(new URL('../../', import.meta.url));
const kit = redisManagers();
const manager = kit.manager;
const value = async (r: Registry, metric: string, labels: Record<string, string>): Promise<number | undefined> => {
  const m = (await r.getMetricsAsJSON()).find((x) => x.name === metric.replace(/_(count|sum)$/, ''));
  // The sum over the series that carry these labels (a reason's demotions span its lost_reasons).
  const hits = ((m?.values ?? []) as { value: number; labels: Record<string, unknown>; metricName?: string }[]).filter((v) => (v.metricName ?? metric) === metric && Object.entries(labels).every(([k, x]) => String(v.labels[k]) === x));
  return hits.length === 0 ? undefined : hits.reduce((n, v) => n + v.value, 0);
};

describe('tenure/metrics', () => {
  it('scraped after a failover: the terms, the demotion and its reason, leader flags, fences, campaign and drain times, stale-fence refusals', async () => {
    const name = `metrics-${process.pid}`;
    const admin = kit.client();
    const [ra, rb] = [new Registry(), new Registry()];
    const [ma, mb] = [new TenureMetrics({ registry: ra }), new TenureMetrics({ registry: rb })];
    const [a, b] = [manager(name, 'a'), manager(name, 'b')];
    ma.instrument(a, { election: 'reports' });
    mb.instrument(b, { election: 'reports' });
    const e = { election: 'reports' };
    a.start();
    const ta = await a.whenElected({ timeoutMs: 10_000 });
    b.start();
    expect(await value(ra, 'tenure_is_leader', e)).toBe(1);
    expect(await value(ra, 'tenure_fence', e)).toBe(Number(ta.fence));
    // The failover: a's lease is deleted; a's renew finds it gone, b wins.
    await admin.eval(`return redis.call('UNLINK', KEYS[1])`, 1, `tenure:lock:{${name}}`);
    const tb = await b.whenElected({ timeoutMs: 10_000 });
    await pollValue(async () => ((await value(ra, 'tenure_demotions_total', { ...e, reason: 'lost' })) === 1 ? true : undefined), 10_000);
    // b writes, then a's late write with its old fence is refused by both kinds of resource.
    const mem = new InMemoryFencedResource('ledger');
    const red = new RedisFencedResource(admin, `metrics-ledger-${process.pid}`);
    await mem.write(tb.fence, () => undefined);
    await red.write(tb.fence, (w) => w.set(`metrics-balance-${process.pid}`, 1));
    await expect(mem.write(ta.fence, () => undefined)).rejects.toBeInstanceOf(StaleFenceError);
    await expect(red.write(ta.fence, (w) => w.set(`metrics-balance-${process.pid}`, 2))).rejects.toBeInstanceOf(StaleFenceError);

    const scrapeA = await ra.metrics();
    console.log(`[metrics] scrape of the demoted process:\n${scrapeA.split('\n').filter((l) => /^tenure_(is_leader|terms_total|demotions_total|fence|stale)/.test(l)).join('\n')}`);
    expect(await value(ra, 'tenure_terms_total', e)).toBe(1);
    expect(await value(ra, 'tenure_is_leader', e)).toBe(0);
    expect(scrapeA).toMatch(/tenure_demotions_total\{election="reports",reason="lost",lost_reason="(expired|renew-failed)"\} 1/);
    expect(await value(ra, 'tenure_drain_seconds_count', e)).toBe(1);
    expect(await value(rb, 'tenure_terms_total', e)).toBe(1);
    expect(await value(rb, 'tenure_is_leader', e)).toBe(1);
    expect(await value(rb, 'tenure_fence', e)).toBe(Number(tb.fence));
    expect(await value(rb, 'tenure_campaign_seconds_count', e)).toBe(1);
    expect(await value(rb, 'tenure_demotions_total', e)).toBe(0); // every reason's series, at 0
    expect(await value(ra, 'tenure_stale_fence_rejections_total', { resource: 'ledger' })).toBe(1);
    expect(await value(ra, 'tenure_stale_fence_rejections_total', { resource: `metrics-ledger-${process.pid}` })).toBe(1);
    await Promise.all([a.close(), b.close()]);
    expect(await value(rb, 'tenure_demotions_total', { ...e, reason: 'closed' })).toBe(1);
    ma.close();
    mb.close();
    await expect(mem.write(ta.fence, () => undefined)).rejects.toBeInstanceOf(StaleFenceError);
    expect(await value(ra, 'tenure_stale_fence_rejections_total', { resource: 'ledger' })).toBe(1); // closed: no longer counting
  });

  it('a process that has never led is scraped whole: every series at 0 from instrument(), campaigning 1, the observed leader, the lease time left', async () => {
    const name = `metrics-fresh-${process.pid}`;
    const [ra, rb] = [new Registry(), new Registry()];
    const [ma, mb] = [new TenureMetrics({ registry: ra }), new TenureMetrics({ registry: rb })];
    const observing = (id: string) => new LeadershipManager(new RedisElection(kit.client(), name, { id, ttlMs: 1000, restartGuardMs: 0, retryMaxMs: 100 }), { backoff: { initialMs: 20, maxMs: 100 } });
    const [a, b] = [observing('a'), observing('b')];
    ma.instrument(a);
    mb.instrument(b);
    const e = { election: name };
    // Before anything ran: the series are there, at 0.
    const before = await rb.metrics();
    for (const line of [`tenure_terms_total{election="${name}"} 0`, `tenure_fence{election="${name}"} 0`, `tenure_is_leader{election="${name}"} 0`, `tenure_campaigning{election="${name}"} 0`, `tenure_lease_remaining_seconds{election="${name}"} 0`, `tenure_observed_leader{election="${name}",leader=""} 1`, `tenure_campaign_seconds_count{election="${name}"} 0`, `tenure_drain_seconds_count{election="${name}"} 0`, `tenure_demotions_total{election="${name}",reason="lost",lost_reason="expired"} 0`, `tenure_demotions_total{election="${name}",reason="resigned",lost_reason=""} 0`]) {
      expect(before.split('\n')).toContain(line);
    }
    a.start();
    await a.whenElected({ timeoutMs: 10_000 });
    b.start();
    // b never leads: it campaigns, sees a as the leader, and still exposes every series.
    await pollValue(async () => ((await value(rb, 'tenure_observed_leader', { ...e, leader: 'a' })) === 1 && (await value(rb, 'tenure_campaigning', e)) === 1 ? true : undefined), 10_000);
    const scrape = await rb.metrics();
    console.log(`[metrics] scrape of a process that never led:\n${scrape.split('\n').filter((l) => l.startsWith('tenure_') && !/_bucket/.test(l)).join('\n')}`);
    expect(await value(rb, 'tenure_terms_total', e)).toBe(0);
    expect(await value(rb, 'tenure_fence', e)).toBe(0);
    expect(await value(rb, 'tenure_is_leader', e)).toBe(0);
    expect(await value(rb, 'tenure_lease_remaining_seconds', e)).toBe(0);
    expect(await value(rb, 'tenure_observed_leader', { ...e, leader: '' })).toBeUndefined(); // replaced by a's id
    // The leader's lease time left is read at the scrape: within (0, TTL].
    const left = await value(ra, 'tenure_lease_remaining_seconds', e);
    expect(left).toBeGreaterThan(0);
    expect(left).toBeLessThanOrEqual(1);
    expect(await value(ra, 'tenure_campaigning', e)).toBe(0);
    await Promise.all([a.close(), b.close()]);
    expect(await value(ra, 'tenure_lease_remaining_seconds', e)).toBe(0);
    ma.close();
    mb.close();
  });

  it('a ShardManager scraped: shards held and assigned, moves in and out, hand-off times', async () => {
    const group = `metrics-shards-${process.pid}`;
    const [ra, rb] = [new Registry(), new Registry()];
    const [ma, mb] = [new TenureMetrics({ registry: ra }), new TenureMetrics({ registry: rb })];
    const shards = (id: string) => {
      const redis = kit.client();
      return new ShardManager(new RedisMembership(redis, group, { id, ttlMs: 1000, observeIntervalMs: 100 }), (s) => new RedisElection(redis, `${group}/${s}`, { id, ttlMs: 1000, restartGuardMs: 0, retryMaxMs: 100 }), { shards: 16, backoff: { initialMs: 20, maxMs: 100 } });
    };
    const [a, b] = [shards('a'), shards('b')];
    ma.instrumentShards(a);
    mb.instrumentShards(b, { group: 'jobs' });
    a.start();
    await a.whenSettled({ timeoutMs: 10_000 });
    expect(await value(ra, 'tenure_shards_held', { group })).toBe(16);
    expect(await value(ra, 'tenure_shard_moves_total', { group, direction: 'in' })).toBe(0); // its start: nobody had them
    b.start();
    await pollValue(async () => (a.members?.length === 2 && b.members?.length === 2 ? true : undefined), 10_000);
    await Promise.all([a.whenSettled({ timeoutMs: 10_000 }), b.whenSettled({ timeoutMs: 10_000 })]);
    const [ha, hb] = [a.held().length, b.held().length];
    expect(ha + hb).toBe(16);
    expect(await value(ra, 'tenure_shards_held', { group })).toBe(ha);
    expect(await value(ra, 'tenure_shards_assigned', { group })).toBe(ha);
    expect(await value(ra, 'tenure_shard_moves_total', { group, direction: 'out' })).toBe(hb);
    expect(await value(rb, 'tenure_shard_moves_total', { group: 'jobs', direction: 'in' })).toBe(hb);
    expect(await value(rb, 'tenure_shards_held', { group: 'jobs' })).toBe(hb);
    expect(await value(rb, 'tenure_shard_handoff_seconds_count', { group: 'jobs' })).toBe(hb);
    console.log(`[metrics] shards:\n${(await rb.metrics()).split('\n').filter((l) => /^tenure_shard/.test(l) && !/_bucket/.test(l)).join('\n')}`);
    await Promise.all([a.close(), b.close()]);
    expect(await value(ra, 'tenure_shards_held', { group })).toBe(0);
    ma.close();
    mb.close();
  });

  it('two instances on one registry share the metrics; bad options are ConfigErrors', () => {
    const r = new Registry();
    new TenureMetrics({ registry: r }).close();
    new TenureMetrics({ registry: r }).close();
    expect(r.getMetricsAsArray().filter((m) => m.name.startsWith('tenure_'))).toHaveLength(10);
    expect(() => new TenureMetrics({ registry: {} as never })).toThrow(expect.objectContaining({ field: 'registry' }));
    expect(() => new TenureMetrics({ registry: r, buckets: [1, 0.5] })).toThrow(expect.objectContaining({ field: 'buckets' }));
  });

  it('importing tenure loads no prom-client and registers nothing', () => {
    const out = execFileSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', `
      import { createRequire } from 'node:module';
      await import(${JSON.stringify(`${root}src/index.ts`)});
      const require = createRequire(${JSON.stringify(root)});
      const loaded = Object.keys(require.cache).some((k) => k.includes('/prom-client/'));
      console.log(JSON.stringify({ loaded }));
    `], { cwd: root, encoding: 'utf8' });
    expect(JSON.parse(out.trim())).toEqual({ loaded: false });
  });
});
