import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FaultProxy } from '../../src/testing/index.js';
import { pollValue } from '../helpers/wait.js';
import { cliCorners } from './corners.js';
import { ChildLog, childScript, exitOf, isRunning, killAll, ms, tenure, type Tenure } from './helpers.js';

/**
 * `tenure run` and `tenure lock` end to end on one backend (issue 12): real tenure processes,
 * real child processes, a real store. Children log to one file, stamped with the shared
 * monotonic clock, so the order of events across processes can be compared.
 */
export interface CliStore {
  /** What --endpoints takes to reach the store directly. */
  endpoint(): string;
  /** host:port → the endpoint through a proxy on `port`. */
  via(port: number): string;
  port(): number;
  stop(): Promise<void>;
}

const TTL_MS = 2000;
/** TTL plus the store's expiry check, the waiter's wake-up and a tsx start, on a loaded 2-core machine. */
const FAILOVER_MAX_MS = TTL_MS + 4000;
let seq = 0;

/**
 * `full: false` leaves out the cases that do not depend on the store (--grace, resign on exit),
 * which the etcd and ZooKeeper files cover.
 */
export function cliSuite(backend: 'etcd' | 'zk' | 'redis' | 'postgres', start: () => Promise<CliStore>, { full = true } = {}): void {
  // Left out, not skipped: they are the same code on every store and run in the etcd and ZooKeeper files.
  const storeIndependent: (name: string, fn: () => Promise<void>, timeout?: number) => void = full ? it : () => undefined;
  describe(`tenure CLI on ${backend}`, () => {
    let store: CliStore;
    let log: ChildLog;
    let procs: Tenure[] = [];
    beforeAll(async () => {
      store = await start();
    });
    afterAll(async () => {
      await store?.stop();
    });
    const setup = (): string => {
      log = new ChildLog();
      procs = [];
      return `cli-${process.pid}-${++seq}`;
    };
    const cleanup = async (): Promise<void> => {
      await killAll(procs);
      // A command that outlived its tenure (the bug some cases catch) is ours to end.
      for (const e of log.events()) if (e.event === 'start' && isRunning(e.pid)) process.kill(e.pid, 'SIGKILL');
      log.remove();
    };
    const run = (name: string, id: string, opts: { endpoint?: string; extra?: string[]; env?: Record<string, string>; cmd?: 'run' | 'lock' } = {}): Tenure => {
      const t = tenure([opts.cmd ?? 'run', '--backend', backend, '--endpoints', opts.endpoint ?? store.endpoint(), '--name', name, '--id', id, '--ttl', `${TTL_MS}ms`, ...(opts.extra ?? []), '--', process.execPath, childScript], log.env(opts.env));
      procs.push(t);
      return t;
    };
    const campaigning = (t: Tenure): Promise<boolean> => pollValue(async () => (/campaigning as|waiting for the lock/.test(t.stderr()) ? true : undefined), 30_000);

    it("two instances: one child at a time; SIGKILL of the leader's tenure starts the other's child within the TTL plus a bound, with a higher TENURE_FENCE; SIGTERM is forwarded", async () => {
      const name = setup();
      try {
        const watcher = tenure(['leader', '--backend', backend, '--endpoints', store.endpoint(), '--name', name, '--watch', '--json']);
        procs.push(watcher);
        const a = run(name, 'a');
        const first = await log.waitFor((e) => e.event === 'start');
        expect(first).toMatchObject({ id: 'a', name });
        const b = run(name, 'b');
        await campaigning(b);
        await new Promise((r) => setTimeout(r, 500)); // queued behind a
        expect(log.events().filter((e) => e.event === 'start')).toHaveLength(1);
        // tenure leader sees a with the fence its child got.
        const shown = tenure(['leader', '--backend', backend, '--endpoints', store.endpoint(), '--name', name, '--json']);
        expect((await exitOf(shown)).code, shown.stderr()).toBe(0);
        expect(JSON.parse(shown.stdout())).toEqual({ id: 'a', fence: first.fence });

        const killedAt = process.hrtime.bigint();
        a.proc.kill('SIGKILL');
        const second = await log.waitFor((e) => e.event === 'start', 2);
        const failover = ms(killedAt, second.t);
        console.log(`[${backend}] tenure run failover after SIGKILL: ${failover.toFixed(0)} ms at TTL ${TTL_MS} ms`);
        expect(second.id).toBe('b');
        expect(failover).toBeLessThan(FAILOVER_MAX_MS);
        expect(BigInt(second.fence)).toBeGreaterThan(BigInt(first.fence));
        expect(isRunning(first.pid), "the SIGKILLed tenure's child outlived it").toBe(false);
        expect(log.events().some((e) => e.overlap)).toBe(false);

        // tenure leader --watch saw both terms (Postgres reads it every second), in order, with the fences the children got.
        const seen = () => watcher.stdout().split('\n').filter(Boolean).map((l) => JSON.parse(l) as { id: string; fence: string } | null);
        await pollValue(async () => (seen().some((l) => l?.id === 'b') ? true : undefined), 10_000);
        const terms = seen().filter((l) => l !== null);
        expect(terms[0]).toEqual({ id: 'a', fence: first.fence });
        expect(terms.find((l) => l.id === 'b')).toEqual({ id: 'b', fence: second.fence });
        watcher.proc.kill('SIGINT');
        expect((await exitOf(watcher)).code, watcher.stderr()).toBe(0);

        b.proc.kill('SIGTERM');
        const { code } = await exitOf(b);
        expect(code, b.stderr()).toBe(0); // the child's own status: it exits 0 on SIGTERM
        expect(log.events().filter((e) => e.pid === second.pid).map((e) => e.event)).toEqual(['start', 'term', 'exit']);
      } finally {
        await cleanup();
      }
    }, 90_000);

    it("a blackholed leader's child receives SIGTERM before the other's child starts, and that tenure exits 75", async () => {
      const name = setup();
      const proxy = await new FaultProxy({ target: { port: store.port() } }).start();
      try {
        const a = run(name, 'a', { endpoint: store.via(proxy.port) });
        await log.waitFor((e) => e.event === 'start');
        const b = run(name, 'b');
        await campaigning(b);
        await new Promise((r) => setTimeout(r, 500));
        proxy.blackhole();
        const second = await log.waitFor((e) => e.event === 'start', 2);
        const term = log.events().find((e) => e.event === 'term' && e.id === 'a');
        expect(term, 'a child got no SIGTERM before the other started').toBeDefined();
        console.log(`[${backend}] blackholed tenure run: its child got SIGTERM ${ms(term!.t, second.t).toFixed(0)} ms before the other child started`);
        expect(term!.t).toBeLessThan(second.t);
        expect(log.events().some((e) => e.overlap)).toBe(false);
        expect((await exitOf(a)).code, a.stderr()).toBe(75);
      } finally {
        await cleanup();
        await proxy.stop();
      }
    }, 90_000);

    storeIndependent('a child that ignores SIGTERM is SIGKILLed after --grace', async () => {
      const name = setup();
      try {
        const a = run(name, 'a', { extra: ['--grace', '1s'], env: { IGNORE_TERM: '1' } });
        const started = await log.waitFor((e) => e.event === 'start');
        a.proc.kill('SIGTERM');
        const term = await log.waitFor((e) => e.event === 'term');
        const { code, t } = await exitOf(a);
        expect(code, a.stderr()).toBe(137); // the child's status: killed by SIGKILL
        expect(isRunning(started.pid)).toBe(false);
        expect(ms(term.t, t)).toBeGreaterThanOrEqual(900);
        expect(a.stderr()).toMatch(/SIGKILL after 1s/);
        expect(a.stderr()).not.toMatch(/does not fit/); // 1s + 200 ms fits 2/3 of a 2 s TTL
      } finally {
        await cleanup();
      }
    }, 60_000);

    storeIndependent("without --grace, a child that ignores SIGTERM is SIGKILLed after the lease's safety margin (TTL/5), not seconds later", async () => {
      const name = setup();
      try {
        const a = run(name, 'a', { env: { IGNORE_TERM: '1' } });
        const started = await log.waitFor((e) => e.event === 'start');
        a.proc.kill('SIGTERM');
        const term = await log.waitFor((e) => e.event === 'term');
        const { code, t } = await exitOf(a);
        expect(code, a.stderr()).toBe(137);
        expect(isRunning(started.pid)).toBe(false);
        expect(ms(term.t, t)).toBeGreaterThanOrEqual(TTL_MS / 5 - 50);
        expect(a.stderr()).toMatch(new RegExp(`SIGKILL after ${TTL_MS / 5}ms`));
      } finally {
        await cleanup();
      }
    }, 60_000);

    storeIndependent("the command's exit resigns: tenure exits with the command's code and the waiting instance runs next, well within the TTL", async () => {
      const name = setup();
      try {
        const done = join(log.dir, 'done');
        const a = run(name, 'a', { env: { EXIT_WHEN: done, EXIT_CODE: '7' } });
        await log.waitFor((e) => e.event === 'start');
        const b = run(name, 'b');
        await campaigning(b);
        await new Promise((r) => setTimeout(r, 500)); // queued behind a
        writeFileSync(done, ''); // a's command exits now
        const { code, t } = await exitOf(a);
        expect(code, a.stderr()).toBe(7);
        const second = await log.waitFor((e) => e.event === 'start', 2);
        expect(second.id).toBe('b');
        expect(ms(t, second.t)).toBeLessThan(TTL_MS);
      } finally {
        await cleanup();
      }
    }, 60_000);

    storeIndependent('--restart: a command that exits while still leading runs again, under the same fence', async () => {
      const name = setup();
      try {
        const a = run(name, 'a', { extra: ['--restart'], env: { EXIT_AFTER_MS: '300', EXIT_CODE: '1' } });
        const first = await log.waitFor((e) => e.event === 'start');
        const third = await log.waitFor((e) => e.event === 'start', 3);
        expect(third.fence).toBe(first.fence);
        expect(a.stderr()).toMatch(/restarting in \d+ ms/);
        a.proc.kill('SIGTERM');
        expect([0, 1]).toContain((await exitOf(a)).code); // the last child's own status
        expect(log.events().some((e) => e.overlap)).toBe(false);
      } finally {
        await cleanup();
      }
    }, 60_000);

    it("tenure lock: a blackholed holder's command gets SIGTERM before the next holder's starts, and that tenure exits 75", async () => {
      const name = setup();
      const proxy = await new FaultProxy({ target: { port: store.port() } }).start();
      try {
        const a = run(name, 'a', { cmd: 'lock', endpoint: store.via(proxy.port) });
        await log.waitFor((e) => e.event === 'start');
        const b = run(name, 'b', { cmd: 'lock', extra: ['--timeout', '0'], env: { EXIT_AFTER_MS: '200' } });
        await campaigning(b);
        await new Promise((r) => setTimeout(r, 500));
        proxy.blackhole();
        const second = await log.waitFor((e) => e.event === 'start', 2).catch((e: unknown) => {
          console.log(`[${backend}] no second start; a's stderr:\n${a.stderr()}\nb's stderr:\n${b.stderr()}\nevents: ${JSON.stringify(log.events(), (_k, v: unknown) => (typeof v === "bigint" ? String(v) : v))}`);
          throw e;
        });
        const term = log.events().find((e) => e.event === 'term' && e.id === 'a');
        expect(term, 'a command got no SIGTERM before the next one started').toBeDefined();
        expect(term!.t).toBeLessThan(second.t);
        expect((await exitOf(a)).code, a.stderr()).toBe(75);
        expect((await exitOf(b)).code, b.stderr()).toBe(0);
      } finally {
        await cleanup();
        await proxy.stop();
      }
    }, 90_000);

    it('tenure lock: waits, runs once with a rising TENURE_FENCE, releases; --timeout passes with 124', async () => {
      const name = setup();
      try {
        const release = join(log.dir, 'release');
        const a = run(name, 'a', { cmd: 'lock', env: { EXIT_WHEN: release, EXIT_CODE: '0' } });
        const first = await log.waitFor((e) => e.event === 'start');
        const impatient = run(name, 'c', { cmd: 'lock', extra: ['--timeout', '300ms'] });
        const b = run(name, 'b', { cmd: 'lock', env: { EXIT_AFTER_MS: '200', EXIT_CODE: '3' } });
        expect((await exitOf(impatient)).code, impatient.stderr()).toBe(124);
        await campaigning(b);
        writeFileSync(release, ''); // a's command exits now
        expect((await exitOf(a)).code, a.stderr()).toBe(0);
        expect((await exitOf(b)).code, b.stderr()).toBe(3);
        const starts = log.events().filter((e) => e.event === 'start');
        expect(starts.map((e) => e.id)).toEqual(['a', 'b']);
        expect(BigInt(starts[1]!.fence)).toBeGreaterThan(BigInt(first.fence));
        expect(log.events().some((e) => e.overlap)).toBe(false);
      } finally {
        await cleanup();
      }
    }, 60_000);

    cliCorners({ backend, store: () => store, log: () => log, setup, cleanup, track: (t) => (procs.push(t), t) }, storeIndependent);
  });
}
