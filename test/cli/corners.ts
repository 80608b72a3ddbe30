import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { FaultProxy } from '../../src/testing/index.js';
import { pollValue } from '../helpers/wait.js';
import { childScript, exitOf, forkScript, isRunning, ms, tenure, type ChildLog, type Tenure } from './helpers.js';
import type { CliStore } from './suite.js';

/** What the suite around these cases shares with them (see suite.ts). */
export interface CliCase {
  backend: 'etcd' | 'zk' | 'redis' | 'postgres';
  store: () => CliStore;
  /** The current case's log (a fresh one per setup()). */
  log: () => ChildLog;
  /** A fresh name, log and process list for one case. */
  setup: () => string;
  cleanup: () => Promise<void>;
  /** Keeps a process for cleanup. */
  track: (t: Tenure) => Tenure;
}

/** The same command three ways: behind a shell, behind npm, behind a script that forks. */
function wrapped(how: 'sh -c' | 'npm run' | 'a script that forks', dir: string): string[] {
  if (how === 'sh -c') return ['sh', '-c', `"${process.execPath}" "${childScript}"; echo done`];
  if (how === 'a script that forks') return [process.execPath, forkScript];
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'job', private: true, scripts: { job: `"${process.execPath}" "${childScript}"` } }));
  return ['npm', '--prefix', dir, 'run', '--silent', 'job'];
}

/**
 * The CLI's exit paths and process handling in the corners (issue 20): what a `tenure lock` that
 * gives up leaves in the store's queue, the grace against the TTL, the command's whole process
 * group. `storeIndependent` runs the process-group cases (left out on Redis and Postgres).
 */
export function cliCorners(c: CliCase, storeIndependent: (name: string, fn: () => Promise<void>, timeout?: number) => void): void {
  const { backend, store, setup, cleanup } = c;
  /** `tenure run|lock` on `name` as `id`, running `command` (the child fixture by default). */
  const start = (cmd: 'run' | 'lock', name: string, id: string, o: { endpoint?: string; extra?: string[]; env?: Record<string, string>; command?: string[] } = {}): Tenure =>
    c.track(tenure([cmd, '--backend', backend, '--endpoints', o.endpoint ?? store().endpoint(), '--name', name, '--id', id, ...(o.extra ?? []), '--', ...(o.command ?? [process.execPath, childScript])], c.log().env(o.env)));
  const waiting = (t: Tenure): Promise<boolean> => pollValue(async () => (/waiting for the lock|campaigning as/.test(t.stderr()) ? true : undefined), 30_000);

  it('tenure lock: waiters that gave up (--timeout, SIGTERM) leave the queue: the next waiter is granted promptly, far within the TTL', async () => {
    const name = setup();
    try {
      const release = join(c.log().dir, 'release');
      const a = start('lock', name, 'a', { extra: ['--ttl', '10s'], env: { EXIT_WHEN: release } });
      await c.log().waitFor((e) => e.event === 'start').catch((e: unknown) => {
        throw new Error(`a never started: ${a.stderr()}`, { cause: e });
      });
      const timedOut = start('lock', name, 'b', { extra: ['--ttl', '10s', '--timeout', '1s'] });
      await waiting(timedOut);
      const stopped = start('lock', name, 'd', { extra: ['--ttl', '10s', '--timeout', '0'] });
      await waiting(stopped);
      expect((await exitOf(timedOut)).code, timedOut.stderr()).toBe(124);
      await new Promise((r) => setTimeout(r, 300)); // d is queued at the store
      stopped.proc.kill('SIGTERM');
      expect((await exitOf(stopped)).code, stopped.stderr()).toBe(143);
      const next0 = start('lock', name, 'c', { extra: ['--ttl', '10s', '--timeout', '30s'], env: { EXIT_AFTER_MS: '100' } });
      await waiting(next0);
      await new Promise((r) => setTimeout(r, 500)); // c is queued behind the two that left
      writeFileSync(release, ''); // a's command exits now
      const { t } = await exitOf(a);
      const next = await c.log().waitFor((e) => e.event === 'start', 2);
      const handoff = ms(t, next.t);
      console.log(`[${backend}] tenure lock hand-off past two waiters that gave up: ${handoff.toFixed(0)} ms at TTL 10 s`);
      expect(next.id).toBe('c');
      expect(handoff).toBeLessThan(1500);
      expect((await exitOf(next0)).code, next0.stderr()).toBe(0);
    } finally {
      await cleanup();
    }
  }, 60_000);

  it('tenure run: a candidate stopped while campaigning (SIGTERM) leaves the queue: the next leads promptly once the leader resigns', async () => {
    const name = setup();
    try {
      const done = join(c.log().dir, 'done');
      const a = start('run', name, 'a', { extra: ['--ttl', '10s'], env: { EXIT_WHEN: done } });
      await c.log().waitFor((e) => e.event === 'start');
      const stopped = start('run', name, 'b', { extra: ['--ttl', '10s'] });
      await waiting(stopped);
      await new Promise((r) => setTimeout(r, 500)); // b is queued at the store
      const next = start('run', name, 'c', { extra: ['--ttl', '10s'], env: { EXIT_AFTER_MS: '100' } });
      await waiting(next);
      await new Promise((r) => setTimeout(r, 500)); // c is queued behind b
      stopped.proc.kill('SIGTERM');
      expect((await exitOf(stopped)).code, stopped.stderr()).toBe(143);
      writeFileSync(done, ''); // a's command exits now: a resigns
      const { t } = await exitOf(a);
      const second = await c.log().waitFor((e) => e.event === 'start', 2);
      console.log(`[${backend}] tenure run hand-off past a candidate that left: ${ms(t, second.t).toFixed(0)} ms at TTL 10 s`);
      expect(second.id).toBe('c');
      expect(ms(t, second.t)).toBeLessThan(1500);
    } finally {
      await cleanup();
    }
  }, 60_000);

  it("tenure run --grace longer than TTL/5: a blackholed leader's command that ignores SIGTERM is dead before the other's starts", async () => {
    const name = setup();
    const proxy = await new FaultProxy({ target: { port: store().port() } }).start();
    try {
      const flags = ['--ttl', '5s', '--grace', '2s'];
      const a = start('run', name, 'a', { endpoint: store().via(proxy.port), extra: flags, env: { IGNORE_TERM: '1' } });
      const first = await c.log().waitFor((e) => e.event === 'start');
      const b = start('run', name, 'b', { extra: flags });
      await waiting(b);
      await new Promise((r) => setTimeout(r, 500)); // queued behind a
      proxy.blackhole();
      const second = await c.log().waitFor((e) => e.event === 'start', 2);
      const term = c.log().events().find((e) => e.event === 'term' && e.id === 'a');
      expect(second.id).toBe('b');
      expect(term, 'a command got no SIGTERM before the other started').toBeDefined();
      console.log(`[${backend}] --ttl 5s --grace 2s, blackholed leader: SIGTERM ${ms(term!.t, second.t).toFixed(0)} ms before the other command started`);
      expect(second.overlap, `a's command (pid ${first.pid}) was still running when b's started`).toBe(false);
      expect(isRunning(first.pid)).toBe(false);
      // The term ended --grace + 250 ms before the lease could expire, and the other is granted only after that.
      // (On Postgres the connection's close after the command's death is the release, and the kit's proxy
      // passes a close through its blackhole: there the other is granted at that release.)
      if (backend !== 'postgres') expect(ms(term!.t, second.t)).toBeGreaterThan(2000 + 250);
      expect((await exitOf(a)).code, a.stderr()).toBe(75);
    } finally {
      await cleanup();
      await proxy.stop();
    }
  }, 60_000);

  for (const how of ['sh -c', 'npm run', 'a script that forks'] as const) {
    storeIndependent(`tenure run -- ${how}: on demotion every process of the command's group is stopped, even one that ignores SIGTERM, before tenure exits 75 and before the other's command starts`, async () => {
      const name = setup();
      const proxy = await new FaultProxy({ target: { port: store().port() } }).start();
      try {
        const command = wrapped(how, c.log().dir);
        const opts = { extra: ['--ttl', '2s'], env: { IGNORE_TERM: '1' }, command };
        const a = start('run', name, 'a', { ...opts, endpoint: store().via(proxy.port) });
        const first = await c.log().waitFor((e) => e.event === 'start');
        const b = start('run', name, 'b', opts);
        await waiting(b);
        await new Promise((r) => setTimeout(r, 500)); // queued behind a
        proxy.blackhole();
        const { code } = await exitOf(a);
        expect(isRunning(first.pid), `the command's own child (pid ${first.pid}) outlived tenure's report`).toBe(false);
        expect(code, a.stderr()).toBe(75);
        expect(c.log().events().some((e) => e.event === 'term' && e.pid === first.pid)).toBe(true); // the group got SIGTERM
        const second = await c.log().waitFor((e) => e.event === 'start', 2);
        expect(second.id).toBe('b');
        expect(second.overlap).toBe(false);
      } finally {
        await cleanup();
        await proxy.stop();
      }
    }, 60_000);
  }

  storeIndependent("a SIGKILLed tenure leaves nothing of its command's group running: the command and what it forked die with it", async () => {
    const name = setup();
    try {
      const a = start('run', name, 'a', { env: { IGNORE_TERM: '1' }, command: ['sh', '-c', `"${process.execPath}" "${forkScript}"; echo done`] });
      const started = await c.log().waitFor((e) => e.event === 'start');
      const killedAt = process.hrtime.bigint();
      a.proc.kill('SIGKILL');
      await a.exited;
      // The watchdog in the group sees tenure's end at once and SIGKILLs the group.
      await pollValue(async () => (isRunning(started.pid) ? undefined : true), 2000);
      console.log(`[${backend}] SIGKILLed tenure: its command's grandchild gone ${ms(killedAt, process.hrtime.bigint()).toFixed(0)} ms later`);
      expect(c.log().events().some((e) => e.event === 'term')).toBe(false); // SIGKILLed, never asked
    } finally {
      await cleanup();
    }
  }, 60_000);

  storeIndependent("a command that exits leaving a process in its group: tenure stops that process before it resigns, and the other's command starts after", async () => {
    const name = setup();
    try {
      const a = start('run', name, 'a', { extra: ['--ttl', '2s'], env: { IGNORE_TERM: '1' }, command: ['sh', '-c', `"${process.execPath}" "${childScript}" & sleep 1; exit 4`] });
      const first = await c.log().waitFor((e) => e.event === 'start');
      start('run', name, 'b', { extra: ['--ttl', '2s'] });
      const { code } = await exitOf(a);
      expect(code, a.stderr()).toBe(4); // the command's own status
      expect(isRunning(first.pid), 'the process the command left behind outlived tenure').toBe(false);
      expect(a.stderr()).toMatch(/left 1 process\(es\) running in its group: stopped them \(SIGTERM, SIGKILL after 400 ms\)/);
      const second = await c.log().waitFor((e) => e.event === 'start', 2);
      expect(second.id).toBe('b');
      expect(second.overlap).toBe(false);
    } finally {
      await cleanup();
    }
  }, 60_000);
}
