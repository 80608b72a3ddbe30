/**
 * `npm run bench [filter…] [--duration ms]`: runs every bench/*.bench.ts case (or those whose
 * group contains a filter word), prints one table and writes it to bench/RESULTS.md.
 */
import { readdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { cpus } from 'node:os';
import { table, type BenchCase, type BenchRow } from './harness.js';

const here = dirname(fileURLToPath(import.meta.url));
const args = process.argv.slice(2);
const di = args.indexOf('--duration');
const durationMs = di >= 0 ? Number(args[di + 1]) : 5000;
const filters = args.filter((a, i) => !a.startsWith('--') && (di < 0 || i !== di + 1));

const files = readdirSync(here).filter((f) => f.endsWith('.bench.ts')).sort();
if (files.length === 0) {
  console.error('bench: no bench/*.bench.ts files');
  process.exit(2);
}
const rows: BenchRow[] = [];
for (const f of files) {
  const mod = (await import(pathToFileURL(join(here, f)).href)) as { cases: BenchCase[] };
  for (const c of mod.cases) {
    if (filters.length > 0 && !filters.some((w) => c.group.includes(w))) continue;
    console.error(`bench: ${c.group} …`);
    rows.push(...(await c.run({ durationMs })));
  }
}
const out = `# tenure benchmarks\n\nMachine: ${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}, Node ${process.version}; ${durationMs} ms per measurement, loopback, real servers from tenure/testing.\n\n${table(rows)}\n`;
writeFileSync(join(here, 'RESULTS.md'), out);
console.log(out);
process.exit(0);
