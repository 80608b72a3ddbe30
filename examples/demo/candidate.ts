/**
 * One candidate of the demo, in its own process: campaigns for `demo/leader` on etcd and, while
 * it leads, sends a fenced write to the demo's resource every 250 ms (checking its lease right
 * before each). argv: name endpoint ttlSeconds. Parent messages: { cmd: 'slow-write' } (check the
 * lease, then take 400 ms before sending the write — the window a GC pause hits), { cmd: 'resign' }.
 */
import { performance } from 'node:perf_hooks';
import { EtcdElection, EtcdSession, createEtcdClient, type Term } from '../../src/recipes/etcd/index.js';
import { LeaseLostError } from '../../src/core/errors.js';
import { onParentMessage, workerReport } from '../../src/testing/index.js';

const [name, endpoint, ttlArg] = process.argv.slice(2) as [string, string, string];
const ttlMs = Number(ttlArg) * 1000;
const client = createEtcdClient({ hosts: [endpoint] });
const offsetNs = process.hrtime.bigint() - BigInt(Math.round(performance.now() * 1e6));
const toNs = (ms: number): string => String(offsetNs + BigInt(Math.round(ms * 1e6)));

let term: Term | undefined;
let seq = 0;
let resign: (() => void) | undefined;

function write(t: Term): void {
  workerReport('write', { name, fence: String(t.fence), seq: ++seq });
}

onParentMessage((m) => {
  const cmd = (m as { cmd?: string }).cmd;
  if (cmd === 'resign') resign?.();
  if (cmd === 'slow-write' && term) {
    const t = term;
    t.throwIfLost(); // the check passes …
    workerReport('checked', { name, fence: String(t.fence) });
    setTimeout(() => write(t), 400); // … and the write goes out later, without another check
  }
});

// One session and one election for the whole life of the process: after a loss or a resign the
// same election campaigns again (the session grants itself a new lease when the last was lost).
const session = await EtcdSession.create({ client, ttlMs });
const election = new EtcdElection(session, 'demo/leader', { id: name });
for (;;) {
  try {
    term = await election.campaign();
  } catch {
    await new Promise((r) => setTimeout(r, 100));
    continue;
  }
  const t = term;
  workerReport('elected', { name, fence: String(t.fence) });
  const ended = new Promise<void>((r) => t.signal.addEventListener('abort', () => r(), { once: true }));
  void ended.then(() => {
    const reason = t.signal.reason as LeaseLostError;
    workerReport('lost', { name, fence: String(t.fence), reason: reason.reason, deadlineNs: toNs(session.deadline) });
  });
  const timer = setInterval(() => {
    if (!t.lost) write(t);
  }, 250);
  const resigned = new Promise<void>((r) => (resign = r));
  await Promise.race([ended, resigned]);
  clearInterval(timer);
  if (!t.signal.aborted) await t.resign().catch(() => undefined);
  term = undefined;
}
