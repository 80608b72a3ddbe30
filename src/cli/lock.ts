import { whenAborted } from '../core/abort.js';
import { AcquireTimeoutError, LeaseLostError } from '../core/errors.js';
import type { Lease } from '../core/lease.js';
import { showMs } from './args.js';
import { Child, describeExit, stopStrays } from './child.js';
import { onStopSignals, signalStatus, startupExit, statusLine, within, type StoreFlags } from './common.js';
import { EXIT } from './exit-codes.js';
import { stopTiming } from './grace.js';
import { openStore } from './stores.js';
import { childEnv } from './secrets.js';

export interface LockFlags extends StoreFlags {
  id: string;
  ttl: number;
  /** Default TTL/5; it must fit the TTL (see grace.ts). */
  grace: number | undefined;
  /** 0: wait without limit. */
  timeout: number;
}

/**
 * `tenure lock`: mutex mode. Waits for the lock (up to `--timeout`), runs the command once with
 * TENURE_FENCE, TENURE_NAME and TENURE_ID, releases the lock when it exits and exits with its
 * status. If the lock is lost meanwhile (its signal aborts at the local deadline), the command's
 * process group gets SIGTERM at once and SIGKILL after `--grace`, and tenure exits 75 once the
 * group is gone. SIGTERM/SIGINT are forwarded. Every way out of the wait (`--timeout`, a signal, a
 * store error) withdraws the waiter from the store's queue before the process exits.
 */
export async function lockCommand(flags: LockFlags, argv: string[]): Promise<number> {
  const say = statusLine(`lock ${flags.name}`);
  const stop = new AbortController();
  let child: Child | undefined;
  let stopSignal: NodeJS.Signals | undefined;
  const removeHandlers = onStopSignals((sig, first) => {
    if (child?.running) child.signal(sig);
    if (!first) return;
    stopSignal = sig;
    say(`${sig}: ${child?.running ? `forwarded to pid ${child.pid}; releasing once it exits` : 'leaving'}`);
    stop.abort();
  });
  try {
    let store;
    let grace;
    try {
      const timing = stopTiming(flags.ttl, flags.grace, flags.backend);
      grace = timing.graceMs;
      store = await openStore(flags, { ttlMs: flags.ttl, safetyMarginMs: timing.safetyMarginMs, warn: say });
    } catch (e) {
      return startupExit(e, say);
    }
    const lock = store.lock(flags.name, flags.id);
    try {
      let lease: Lease;
      try {
        say(`waiting for the lock as ${flags.id} on ${flags.backend}${flags.timeout ? ` (timeout ${showMs(flags.timeout)})` : ''}`);
        lease = await lock.acquire({ signal: stop.signal, ...(flags.timeout ? { timeoutMs: flags.timeout } : {}) });
      } catch (e) {
        if (stopSignal) return signalStatus(stopSignal);
        if (e instanceof AcquireTimeoutError) {
          say(`not granted within ${showMs(flags.timeout)}`);
          return EXIT.timeout;
        }
        return startupExit(e, say);
      }
      const env = { ...childEnv(flags), TENURE_FENCE: String(lease.fence), TENURE_NAME: flags.name, TENURE_ID: flags.id };
      child = new Child(argv, env);
      say(`granted (fence ${lease.fence}): started ${argv[0]} (pid ${child.pid ?? '-'})`);
      const exited = await Promise.race([child.exited, whenAborted(lease.signal).then(() => undefined)]);
      if (exited === undefined) {
        const r = lease.signal.reason;
        say(`lock lost (${r instanceof LeaseLostError ? r.reason : 'lost'}): SIGTERM to pid ${child.pid}, SIGKILL after ${showMs(grace)}`);
        say(`${argv[0]} ${describeExit(await child.stop(grace))}`);
        return EXIT.lost;
      }
      await stopStrays(child, grace, say);
      say(`${argv[0]} ${describeExit(exited)}; releasing`);
      await lease.release().catch((e: unknown) => say(`release: ${e instanceof Error ? e.message : String(e)}`));
      return exited.status;
    } finally {
      await within(lock.close().then(() => store.close()), 3000);
    }
  } finally {
    removeHandlers();
  }
}
