/**
 * The in-memory register in a process of its own: an InMemoryFencedResource behind a Unix
 * socket (argv[2]), one JSON line per write (one resource per register name: a shard's own). It logs each accepted write inside the write
 * function, so the log order is the resource's own order. The parent asks for the log with
 * `{ cmd: 'log' }` and gets a `log` report.
 */
import { createServer } from 'node:net';
import { InMemoryFencedResource, StaleFenceError } from '../src/index.js';
import { onParentMessage, workerReport } from '../src/testing/index.js';

const path = process.argv[2]!;
// One resource and one log per register name: `memory`, or `memory/<shard>` in the shard kind.
const resources = new Map<string, InMemoryFencedResource>();
const logs = new Map<string, { id: string; fence: bigint }[]>();
const registerOf = (name: string) => {
  let resource = resources.get(name);
  if (!resource) {
    resources.set(name, (resource = new InMemoryFencedResource(name)));
    logs.set(name, []);
  }
  return { resource, log: logs.get(name)! };
};

const server = createServer((sock) => {
  let buf = '';
  sock.setEncoding('utf8');
  sock.on('error', () => undefined);
  sock.on('data', (d: string) => {
    buf += d;
    for (let i = buf.indexOf('\n'); i >= 0; i = buf.indexOf('\n')) {
      const m = JSON.parse(buf.slice(0, i)) as { seq: number; id: string; fence: string; bypass: boolean; register?: string };
      buf = buf.slice(i + 1);
      const { resource, log } = registerOf(m.register ?? 'memory');
      const fence = BigInt(m.fence);
      const reply = (r: object): void => void (sock.writable && sock.write(`${JSON.stringify({ seq: m.seq, ...r })}\n`));
      if (m.bypass) {
        log.push({ id: m.id, fence });
        reply({ ok: true });
        continue;
      }
      resource.write(fence, () => void log.push({ id: m.id, fence })).then(
        () => reply({ ok: true }),
        (e: unknown) => reply({ ok: false, highest: e instanceof StaleFenceError ? e.highest.toString() : '0' }),
      );
    }
  });
});
server.listen(path, () => workerReport('ready', { path }));
onParentMessage((m) => {
  if ((m as { cmd?: string }).cmd === 'log') workerReport('log', { logs: Object.fromEntries(logs) });
});
