/**
 * `npm run demo`: tenure's framework, narrated. Starts a real etcd and a real ZooKeeper
 * (tenure/testing), then on each: three candidate processes run a LeadershipManager whose
 * onElected does fenced writes with the term's signal — the leader is SIGKILLed (failover against
 * the lease TTL / session timeout), the next is frozen past its lease between a check and a write
 * (Kleppmann's scenario: the fence rejects the write), the third resigns (signal, drain, release,
 * onDemoted, hand-off). Then `tenure run` fails over a small script. Ends with a summary table and
 * an SVG timeline, written to the file it names (argv[2], default ./demo-timeline.svg).
 */
import { writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { EtcdServer, ZooKeeperServer } from '../../src/testing/index.js';
import { renderTimeline } from './chart.js';
import { cliStory } from './cli-story.js';
import { managerStory, type Say } from './story.js';
import type { Section } from './timeline.js';

const TTL_MS = 2000;
const chartPath = resolve(process.argv[2] ?? 'demo-timeline.svg');
const t0 = process.hrtime.bigint();
const stamp = (t: bigint): string => `${(Number(t - t0) / 1e9).toFixed(2).padStart(6)}s`;
const narrator = (tag: string): Say => (text, t = process.hrtime.bigint()) => console.log(`[${stamp(t)}] ${tag.padEnd(4)} ${text}`);

function table(sections: Section[]): string {
  const rows: string[][] = [['', 'holder', 'fence', 'led (s)', 'ended', 'writes', 'rejected']];
  for (const s of sections) {
    for (const t of s.terms) {
      const rejected = s.writes.filter((w) => w.rejected && w.name === t.name && w.fence === t.fence).length;
      rows.push([s.backend, t.name, t.fence, `${(t.start / 1000).toFixed(2)} → ${((t.end ?? s.durationMs) / 1000).toFixed(2)}`, t.ended, s.backend === 'cli' ? '-' : String(t.writes), s.backend === 'cli' ? '-' : String(rejected)]);
    }
  }
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  const line = (r: string[]): string => `  ${r.map((c, i) => c.padEnd(widths[i]!)).join('  ')}`;
  const gaps = sections.flatMap((s) => s.gaps.map((g) => `  ${s.backend.padEnd(5)} ${g.cause.padEnd(8)} → ${g.name.padEnd(6)} ${String(Math.round(g.to - g.from)).padStart(5)} ms${g.cause === 'resign' ? '   (no TTL to wait for)' : `   ${((g.to - g.from) / s.ttlMs).toFixed(2)} × TTL (${s.ttlMs} ms)`}`));
  return [line(rows[0]!), line(widths.map((w) => '-'.repeat(w))), ...rows.slice(1).map(line), '', '  failover: from the fault to the next leader', ...gaps].join('\n');
}

async function main(): Promise<Record<string, unknown>> {
  console.log(`tenure demo: the lifecycle manager and the CLI on real etcd and ZooKeeper (TTL ${TTL_MS} ms)\n`);
  const [etcd, zk] = await Promise.all([new EtcdServer().start(), new ZooKeeperServer().start()]);
  const pids: number[] = [];
  const sections: Section[] = [];
  try {
    narrator('')(`etcd is up on ${etcd.endpoint}, ZooKeeper on ${zk.connectionString}`);
    console.log(`\n■ etcd: three candidates, each running a LeadershipManager (lease TTL ${TTL_MS} ms)`);
    const e = await managerStory('etcd', etcd.endpoint, TTL_MS, narrator('etcd'));
    sections.push(e.section);
    pids.push(...e.pids);
    console.log(`\n■ ZooKeeper: the same code on a LeaderLatch — a session that expires instead of a lease (timeout ${TTL_MS} ms)`);
    const z = await managerStory('zk', zk.connectionString, TTL_MS, narrator('zk'));
    sections.push(z.section);
    pids.push(...z.pids);
    console.log(`\n■ tenure run: a shell-level job that runs only while its tenure leads`);
    const c = await cliStory(etcd.endpoint, TTL_MS, narrator('cli'));
    sections.push(c.section);
    pids.push(...c.pids);

    console.log(`\nSummary\n${table(sections)}`);
    writeFileSync(chartPath, renderTimeline(sections));
    console.log(`\nTimeline chart written to ${chartPath}`);
    return {
      ttlMs: TTL_MS,
      sections: sections.map((s) => ({
        backend: s.backend,
        terms: s.terms,
        gaps: s.gaps.map((g) => ({ cause: g.cause, name: g.name, ms: Math.round(g.to - g.from) })),
        writesAccepted: s.writes.filter((w) => !w.rejected).length,
        rejected: s.writes.filter((w) => w.rejected),
      })),
      cliExitCode: c.exitCode,
      chart: chartPath,
      pids,
      serverPids: [etcd.pid, zk.pid],
      elapsedMs: Math.round(Number(process.hrtime.bigint() - t0) / 1e6),
    };
  } finally {
    await Promise.all([etcd.stop(), zk.stop()]);
  }
}

main().then(
  (summary) => {
    console.log(`SUMMARY ${JSON.stringify(summary)}`);
    process.exit(0);
  },
  (e: unknown) => {
    console.error(e);
    process.exit(1);
  },
);
