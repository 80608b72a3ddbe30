import type { Failover } from '../src/testing/index.js';
import type { ChaosReport } from './runner.js';

const pct = (xs: number[], p: number): number => xs[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))]!;

function distribution(fs: Failover[]): string[] {
  const by = new Map<string, number[]>();
  for (const f of fs) by.set(f.cause, [...(by.get(f.cause) ?? []), f.ms]);
  return [...by].map(([cause, xs]) => {
    xs.sort((a, b) => a - b);
    const r = (v: number): string => v.toFixed(0);
    return `${cause}: n=${xs.length} min ${r(xs[0]!)} p50 ${r(pct(xs, 50))} p90 ${r(pct(xs, 90))} max ${r(xs.at(-1)!)}`;
  });
}

/** The run's results, as printed by `npm run chaos`. */
export function summarize(report: ChaosReport, historyFile?: string): string {
  const { config: c, result } = report;
  const s = result.stats;
  const ops = Object.entries(s.operations);
  const total = ops.reduce((a, [, o]) => a + o.invoked, 0);
  const slots = new Map<string, number>();
  for (const [p, n] of Object.entries(s.termsByProcess)) slots.set(p.split('.')[0]!, (slots.get(p.split('.')[0]!) ?? 0) + n);
  const lines = [
    `chaos ${c.backend}${c.kind === 'manager' ? ' · kind manager' : c.kind === 'shards' ? ` · kind shards (${c.shards} shards)` : ''} · seed ${c.seed} · ${c.candidates} candidates · ${(c.durationMs / 1000).toFixed(0)} s of faults (${(report.elapsedMs / 1000).toFixed(0)} s in all) · TTL ${c.ttlMs} ms${c.bypassFencing ? ' · FENCING BYPASSED' : ''}`,
    `  operations: ${total} (${ops.map(([f, o]) => `${f} ${o.invoked}: ok ${o.ok}, fail ${o.fail}, unknown ${o.info}`).join('; ')})`,
    `  faults: ${Object.entries(s.faults).map(([k, n]) => `${k} ${n}`).join(', ') || 'none'}`,
    `  stale writes rejected: ${s.staleRejected} · writes acknowledged: ${s.writesAcknowledged}`,
    `  terms: ${s.terms} · by candidate slot: ${[...slots].sort().map(([k, n]) => `${k} ${n}`).join(', ')}`,
    `  failover, ms from what ended a term (the last fault on the holder, a release, or nothing: unprovoked) to the next grant:`,
    ...distribution(s.failovers).map((l) => `    ${l}`),
    `  faults the holder rode out: ${Object.entries(s.survived).map(([k, n]) => `${k} ${n}`).join(', ') || 'none'}`,
    `  violations: ${result.violations.length}${result.violations.length ? ` (${[...new Set(result.violations.map((v) => v.rule))].map((r) => `${r} ${result.violations.filter((v) => v.rule === r).length}`).join(', ')})` : ''}`,
    ...result.violations.slice(0, 10).map((v) => `    ${v.rule}: ${v.message}`),
  ];
  // A candidate that died on its own is a bug, whatever the checker found: its last words first.
  for (const c of report.crashes ?? []) {
    const last = c.output.trim().split('\n').slice(-12).join('\n      ');
    lines.push(`  CRASHED: ${c.name} exited on its own (${c.signal ?? `code ${c.code}`}):\n      ${last}`);
  }
  if (historyFile) lines.push(`  history: ${historyFile}`);
  return lines.join('\n');
}
