import { sleep, whenAborted } from '../core/abort.js';
import { Backoff } from '../core/backoff.js';
import { TermEndedError } from '../core/errors.js';
import { LeadershipManager } from '../lifecycle/manager.js';
import { showMs } from './args.js';
import { Child, describeExit, stopStrays, type ChildExit } from './child.js';
import { onStopSignals, signalStatus, startupExit, statusLine, within, type StoreFlags } from './common.js';
import { EXIT } from './exit-codes.js';
import { stopTiming } from './grace.js';
import { openStore } from './stores.js';
import { childEnv } from './secrets.js';

export interface RunFlags extends StoreFlags {
  id: string;
  ttl: number;
  /** Default TTL/5; it must fit the TTL (see grace.ts). */
  grace: number | undefined;
  restart: boolean;
}

/** A child that ran at least this long restarts without backoff. */
const HEALTHY_MS = 10_000;

/**
 * `tenure run`: campaigns through a LeadershipManager and runs the command only while leading.
 *
 * - Elected: the command starts with TENURE_FENCE, TENURE_NAME and TENURE_ID in its environment.
 * - The term ends (the lease lost or possibly lost — the term's signal aborts at the session's
 *   local deadline, `--grace` + a bound before the store could grant the name elsewhere): SIGTERM
 *   to the command's process group at once, SIGKILL after `--grace`. The manager's drain waits
 *   for the whole group to be gone before the lease is released.
 * - The command exits (what it left in its group is stopped first): leadership is resigned and
 *   tenure exits with its status; with `--restart` it runs again while still leading, and after a
 *   lost term tenure campaigns again.
 * - SIGTERM/SIGINT: forwarded to the command's group; once it is gone, tenure resigns and exits
 *   with the command's status.
 */
export async function runCommand(flags: RunFlags, argv: string[]): Promise<number> {
  const say = statusLine(`run ${flags.name}`);
  let store;
  let timing;
  try {
    timing = stopTiming(flags.ttl, flags.grace, flags.backend);
    store = await openStore(flags, { ttlMs: flags.ttl, safetyMarginMs: timing.safetyMarginMs, warn: say });
  } catch (e) {
    return startupExit(e, say);
  }
  const grace = timing.graceMs;
  const candidate = store.candidate(flags.name, flags.id);
  try {
    await candidate.leader({ timeoutMs: flags.callTimeout }); // the store answers (Redis and Postgres connect lazily)
  } catch (e) {
    await within(candidate.close().then(() => store.close()), 2000);
    return startupExit(e, say);
  }

  const manager = new LeadershipManager(candidate, {
    drainTimeoutMs: grace + 5000, // SIGTERM, --grace, SIGKILL, and the exit's arrival
    releaseOnReturn: !flags.restart,
    backoff: { initialMs: 100, maxMs: 2000 },
  });
  let child: Child | undefined;
  let last: ChildExit | undefined;
  let stopSignal: NodeJS.Signals | undefined;
  let exitCode: number | undefined;
  let finished!: () => void;
  const whenFinished = new Promise<void>((r) => (finished = r));
  let closing: Promise<void> | undefined;
  /** Ends it all: the first exit code given wins (a stopped child's status, read later, if none). */
  const finish = (code: number | undefined): void => {
    exitCode ??= code;
    closing ??= manager.close().then(finished);
  };

  manager.onElected(async ({ signal, fence }) => {
    const restarts = new Backoff({ initialMs: 200, maxMs: 5000 });
    for (;;) {
      const env = { ...childEnv(flags), TENURE_FENCE: String(fence), TENURE_NAME: flags.name, TENURE_ID: flags.id };
      const started = performance.now();
      child = new Child(argv, env);
      say(`elected (fence ${fence}): started ${argv[0]} (pid ${child.pid ?? '-'})`);
      const exited = await Promise.race([child.exited, whenAborted(signal).then(() => undefined)]);
      if (exited === undefined) {
        const why = signal.reason instanceof TermEndedError ? `${signal.reason.reason}${signal.reason.lostReason ? ` (${signal.reason.lostReason})` : ''}` : 'ended';
        say(`term ${fence} ended: ${why}; ${stopSignal ?? 'SIGTERM'} to pid ${child.pid}, SIGKILL after ${showMs(grace)}`);
        last = await child.stop(grace);
        say(`${argv[0]} ${describeExit(last)}`);
        return;
      }
      last = exited;
      say(`${argv[0]} ${describeExit(last)}`);
      await stopStrays(child, grace, say);
      if (!flags.restart || signal.aborted || stopSignal) return; // releaseOnReturn: the term ends, the lease is released
      if (performance.now() - started > HEALTHY_MS) restarts.reset();
      const pause = restarts.next();
      say(`restarting in ${Math.round(pause)} ms`);
      if (!(await sleep(pause, signal).then(() => true, () => false))) return;
    }
  });
  manager.onDemoted(({ reason, lostReason, fence }) => {
    say(`resigned term ${fence} (${reason}${lostReason ? `: ${lostReason}` : ''})`);
    if (stopSignal) return;
    if (reason === 'hook-returned') return finish(last?.status ?? EXIT.software);
    if (reason === 'lost' && !flags.restart) return finish(EXIT.lost);
    if (reason === 'hook-error') return finish(EXIT.software);
    say('campaigning again');
  });
  manager.on('error', (e) => say(`${e instanceof Error ? e.message : String(e)}`));
  const removeHandlers = onStopSignals((sig, first) => {
    const running = child?.running === true;
    if (running) child!.signal(sig);
    if (!first) return;
    stopSignal = sig;
    say(`${sig}: ${running ? `forwarded to pid ${child!.pid}; resigning once it exits` : 'leaving'}`);
    // With a child running, tenure exits with the child's status once it has stopped.
    finish(running ? undefined : signalStatus(sig));
  });
  say(`campaigning as ${flags.id} on ${flags.backend} (ttl ${showMs(flags.ttl)})`);
  manager.start();
  await whenFinished;
  removeHandlers();
  await within(store.close(), 3000);
  return exitCode ?? last?.status ?? EXIT.software;
}
