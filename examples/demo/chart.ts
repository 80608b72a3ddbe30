/**
 * The demo's timeline as an SVG: one panel per section, one row per candidate; a bar per term
 * (who led when, labelled with its fence), ticks for accepted writes, a red mark for each write
 * the fence rejected, the faults (SIGKILL, SIGSTOP…SIGCONT, resign, SIGTERM), and under each
 * failover its gap measured against the TTL (dashed line: fault + TTL).
 */
import type { Section } from './timeline.js';

const W = 1100;
const LEFT = 80;
/** The right-hand column holds the failover labels. */
const RIGHT = 280;
const ROW = 30;
const COLORS = ['#4e79a7', '#59a14f', '#b07aa1', '#f28e2b', '#76b7b2'];
const esc = (s: string): string => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
const sec = (ms: number): string => `${(ms / 1000).toFixed(2)} s`;

function panel(s: Section, y0: number): { svg: string; height: number } {
  const x = (ms: number): number => LEFT + (Math.max(0, ms) / Math.max(1, s.durationMs)) * (W - LEFT - RIGHT);
  const rowY = (name: string): number => y0 + 28 + s.rows.indexOf(name) * ROW;
  const out: string[] = [];
  out.push(`<text x="10" y="${y0 + 16}" class="title">${esc(s.title)}</text>`);
  const rowsEnd = y0 + 28 + s.rows.length * ROW;
  for (const [i, name] of s.rows.entries()) {
    out.push(`<text x="10" y="${rowY(name) + 18}" class="label">${esc(name)}</text>`);
    out.push(`<line x1="${LEFT}" x2="${W - RIGHT}" y1="${rowY(name) + 13}" y2="${rowY(name) + 13}" class="lane" stroke="${COLORS[i % COLORS.length]}"/>`);
  }
  for (const t of s.terms) {
    const i = s.rows.indexOf(t.name);
    const x1 = x(t.start);
    const x2 = Math.max(x1 + 2, x(t.end ?? s.durationMs));
    const title = `${s.backend} term: ${t.name}, fence ${t.fence}, ${sec(t.start)} to ${sec(t.end ?? s.durationMs)}, ended: ${t.ended}, ${t.writes} writes accepted`;
    out.push(`<g><title>${esc(title)}</title><rect x="${x1.toFixed(1)}" y="${rowY(t.name) + 3}" width="${(x2 - x1).toFixed(1)}" height="20" rx="3" fill="${COLORS[i % COLORS.length]}"/>`);
    const inside = x2 - x1 > 62; // else the label goes after the bar
    out.push(`<text x="${(inside ? x1 + 4 : x2 + 3).toFixed(1)}" y="${rowY(t.name) + 17}" class="${inside ? 'fence' : 'fence outside'}">fence ${esc(t.fence)}</text></g>`);
  }
  for (const w of s.writes) {
    const wx = x(w.t).toFixed(1);
    const y = rowY(w.name);
    if (w.rejected) {
      out.push(`<g><title>${esc(`rejected write from ${w.name}: fence ${w.fence} < ${w.highest ?? '?'}`)}</title><circle cx="${wx}" cy="${y + 13}" r="7" class="rejected"/><text x="${wx}" y="${y + 17}" class="x">✕</text>`);
      out.push(`<text x="${wx}" y="${y - 1}" class="note reject">rejected: fence ${esc(w.fence)} &lt; ${esc(w.highest ?? '?')}</text></g>`);
    } else out.push(`<line x1="${wx}" x2="${wx}" y1="${y + 23}" y2="${y + 27}" class="write"/>`);
  }
  for (const f of s.faults) {
    const y = rowY(f.name);
    if (f.kind === 'SIGSTOP') {
      const x1 = x(f.t);
      const x2 = x(f.until ?? s.durationMs);
      out.push(`<rect x="${x1.toFixed(1)}" y="${y + 1}" width="${(x2 - x1).toFixed(1)}" height="24" fill="url(#hatch)" class="frozen"><title>${esc(`${f.name} frozen: SIGSTOP ${sec(f.t)}, SIGCONT ${sec(f.until ?? s.durationMs)}`)}</title></rect>`);
      out.push(`<text x="${(x1 + 2).toFixed(1)}" y="${y - 1}" class="note">SIGSTOP … SIGCONT</text>`);
    } else {
      out.push(`<line x1="${x(f.t).toFixed(1)}" x2="${x(f.t).toFixed(1)}" y1="${y}" y2="${y + 26}" class="fault"/><text x="${(x(f.t) + 3).toFixed(1)}" y="${y - 1}" class="note fault-label">${f.kind}</text>`);
    }
  }
  let gy = rowsEnd + 6;
  for (const g of s.gaps) {
    const x1 = x(g.from);
    const x2 = x(g.to);
    const ttlX = x(g.from + s.ttlMs);
    const gap = g.to - g.from;
    out.push(`<g><title>${esc(`failover after ${g.cause}: ${Math.round(gap)} ms to ${g.name}'s election (TTL ${s.ttlMs} ms)`)}</title>`);
    out.push(`<rect x="${x1.toFixed(1)}" y="${gy}" width="${Math.max(1, x2 - x1).toFixed(1)}" height="8" class="gap"/>`);
    if (g.cause !== 'resign') out.push(`<line x1="${ttlX.toFixed(1)}" x2="${ttlX.toFixed(1)}" y1="${gy - 4}" y2="${gy + 12}" class="ttl"/>`);
    out.push(`<line x1="${x2.toFixed(1)}" x2="${W - RIGHT + 6}" y1="${gy + 4}" y2="${gy + 4}" class="leader"/>`);
    out.push(`<text x="${W - RIGHT + 10}" y="${gy + 8}" class="note">${esc(`${g.cause} → ${g.name}: ${Math.round(gap)} ms${g.cause === 'resign' ? ' (no TTL to wait)' : ` = ${(gap / s.ttlMs).toFixed(2)} × TTL`}`)}</text></g>`);
    gy += 16;
  }
  const axisY = gy + 6;
  out.push(`<line x1="${LEFT}" x2="${W - RIGHT}" y1="${axisY}" y2="${axisY}" class="axis"/>`);
  for (let ms = 0; ms <= s.durationMs; ms += 1000) {
    out.push(`<line x1="${x(ms).toFixed(1)}" x2="${x(ms).toFixed(1)}" y1="${axisY}" y2="${axisY + 4}" class="axis"/><text x="${x(ms).toFixed(1)}" y="${axisY + 15}" class="tick">${ms / 1000}s</text>`);
  }
  return { svg: out.join('\n'), height: axisY + 30 - y0 };
}

/** The whole chart, one panel per section. */
export function renderTimeline(sections: Section[]): string {
  const parts: string[] = [];
  const parts0 = `<text x="10" y="22" class="head">tenure demo: who led when</text>
<text x="10" y="40" class="note">bar: a term, with its fence · tick: a write the ledger accepted · red ✕: a write the fence rejected · hatched: frozen (SIGSTOP … SIGCONT) · red line: a fault · yellow: the failover gap, dashed line: fault + TTL</text>`;
  parts.push(parts0);
  let y = 50;
  for (const s of sections) {
    const p = panel(s, y);
    parts.push(p.svg);
    y += p.height + 10;
  }
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${y}" viewBox="0 0 ${W} ${y}" font-family="system-ui, sans-serif">
<title>tenure demo: who led when, each fence, each rejected write, failover gaps against the TTL</title>
<defs><pattern id="hatch" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="3" height="6" fill="#888" opacity="0.55"/></pattern>
<style>
.head { font-size: 16px; font-weight: 700; fill: #111 } .leader { stroke: #ccc; stroke-dasharray: 1 2 }
.title { font-size: 14px; font-weight: 600; fill: #222 } .label { font-size: 13px; fill: #333 }
.lane { stroke-width: 1; opacity: 0.25 } .fence { font-size: 11px; fill: #fff; font-family: ui-monospace, monospace } .fence.outside { fill: #333 }
.write { stroke: #333; stroke-width: 1 } .rejected { fill: #d62728 } .x { font-size: 10px; fill: #fff; text-anchor: middle }
.note { font-size: 10px; fill: #444 } .reject { fill: #d62728; font-weight: 600 } .fault { stroke: #d62728; stroke-width: 2 } .fault-label { fill: #d62728 }
.gap { fill: #f2b701 } .ttl { stroke: #222; stroke-dasharray: 3 2 } .axis { stroke: #999 } .tick { font-size: 10px; fill: #666; text-anchor: middle }
</style></defs>
<rect width="100%" height="100%" fill="#fff"/>
${parts.join('\n')}
</svg>
`;
}
