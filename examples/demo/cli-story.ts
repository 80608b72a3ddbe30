/**
 * `tenure run` seen working: two instances on one name run examples/demo/job.mjs only while
 * leading. SIGKILL the leading tenure: its job dies with it, and the other's job starts once the
 * lease has expired, with a higher TENURE_FENCE. Then SIGTERM the new leader: forwarded, the job
 * stops, tenure resigns and exits with the job's status.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import type { Say } from './story.js';
import { at, newSection, openTerm, type Section } from './timeline.js';

const main = new URL('../../src/cli/main.ts', import.meta.url).pathname;
const job = new URL('./job.mjs', import.meta.url).pathname;
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

interface Instance {
  name: string;
  proc: ChildProcess;
  jobPids: number[];
  exit: Promise<number | null>;
}

export async function cliStory(endpoint: string, ttlMs: number, say: Say): Promise<{ section: Section; pids: number[]; exitCode: number | null }> {
  const s = newSection(`tenure run on etcd, TTL ${ttlMs} ms`, 'cli', ttlMs, ['dave', 'erin']);
  const elected: { name: string; fence: string; t: bigint }[] = [];
  const start = (name: string): Instance => {
    const args = ['run', '--backend', 'etcd', '--endpoints', endpoint, '--name', 'demo/cli', '--id', name, '--ttl', `${ttlMs / 1000}s`, '--', 'node', job];
    if (name === 'dave') say(`$ tenure ${args.slice(0, -1).join(' ')} examples/demo/job.mjs    (as dave, then as erin)`);
    const proc = spawn(process.execPath, ['--import', 'tsx', main, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    const inst: Instance = { name, proc, jobPids: [], exit: new Promise((r) => proc.once('exit', (code) => r(code))) };
    const lines = (stream: NodeJS.ReadableStream, onLine: (l: string, t: bigint) => void): void => {
      let buf = '';
      stream.on('data', (d: Buffer) => {
        const t = process.hrtime.bigint();
        buf += d.toString();
        for (let i = buf.indexOf('\n'); i >= 0; i = buf.indexOf('\n')) {
          onLine(buf.slice(0, i), t);
          buf = buf.slice(i + 1);
        }
      });
    };
    lines(proc.stdout!, (l, t) => {
      const m = /^job (\d+) started/.exec(l);
      if (m) inst.jobPids.push(Number(m[1]));
      if (m || /SIGTERM/.test(l)) say(`  ${name} │ ${l}`, t); // the job's own stdout, passed through untouched
    });
    lines(proc.stderr!, (l, t) => {
      const m = /elected \(fence (\d+)\)/.exec(l);
      if (m) {
        elected.push({ name, fence: m[1]!, t });
        s.terms.push({ name, fence: m[1]!, start: at(s, t), ended: 'still leading', writes: 0 });
      }
      if (/elected|ended|exited|SIGTERM|resigned/.test(l)) say(`  ${name} ⟩ ${l}`, t); // tenure's status lines (stderr)
    });
    return inst;
  };
  const waitElected = async (n: number): Promise<{ name: string; fence: string; t: bigint }> => {
    const end = performance.now() + 20_000;
    while (elected.length <= n) {
      if (performance.now() > end) throw new Error('demo: tenure run elected nobody within 20 s');
      await sleep(10);
    }
    return elected[n]!;
  };

  const all: Instance[] = [];
  let exitCode: number | null = null;
  try {
    all.push(start('dave'));
    await sleep(300);
    all.push(start('erin')); // queues behind dave
    const first = await waitElected(0);
    await sleep(1200);
    const tKill = process.hrtime.bigint();
    const leader = all.find((i) => i.name === first.name)!;
    const other = all.find((i) => i !== leader)!;
    leader.proc.kill('SIGKILL');
    s.faults.push({ kind: 'SIGKILL', name: leader.name, t: at(s, tKill) });
    const t1 = openTerm(s, leader.name)!;
    t1.end = at(s, tKill);
    t1.ended = 'SIGKILL';
    say(`SIGKILL ${leader.name}'s tenure: its job's whole process group dies with it (pdeathsig, the group's watchdog); the lease is left to expire`, tKill);
    const second = await waitElected(1);
    s.gaps.push({ cause: 'SIGKILL', from: at(s, tKill), to: at(s, second.t), name: second.name });
    say(`failover: ${other.name}'s job starts ${Math.round(at(s, second.t) - at(s, tKill))} ms after the crash (TTL ${ttlMs} ms), TENURE_FENCE ${second.fence} > ${first.fence}`, second.t);
    await sleep(700);
    const tTerm = process.hrtime.bigint();
    s.faults.push({ kind: 'SIGTERM', name: other.name, t: at(s, tTerm) });
    other.proc.kill('SIGTERM');
    say(`SIGTERM ${other.name}'s tenure: forwarded to its job; once the job exits, tenure resigns`, tTerm);
    exitCode = await other.exit;
    const t2 = openTerm(s, other.name)!;
    t2.end = at(s);
    t2.ended = 'SIGTERM, resigned';
    say(`${other.name}'s tenure exited with ${exitCode} (its job's own status)`);
  } finally {
    for (const i of all) if (i.proc.exitCode === null && i.proc.signalCode === null) i.proc.kill('SIGKILL');
    await Promise.all(all.map((i) => i.exit));
    for (const t of s.terms.filter((x) => x.end === undefined)) Object.assign(t, { end: at(s), ended: 'demo ended' });
    s.durationMs = at(s);
  }
  return { section: s, pids: all.flatMap((i) => [i.proc.pid!, ...i.jobPids]), exitCode };
}
