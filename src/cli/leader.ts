import type { LeaderInfo } from '../core/candidate.js';
import { sleep } from '../core/abort.js';
import { sameLeader } from '../core/observe.js';
import { onStopSignals, startupExit, statusLine, within, type StoreFlags } from './common.js';
import { openStore } from './stores.js';

export interface LeaderFlags extends StoreFlags {
  watch: boolean;
  json: boolean;
}

/** One line per leader on stdout: `<id> fence <fence>` (or `none`), or a JSON object (or `null`). */
export function formatLeader(leader: LeaderInfo | undefined, json: boolean): string {
  if (json) return JSON.stringify(leader ? { id: leader.id, fence: leader.fence === undefined ? null : String(leader.fence) } : null);
  return leader ? `${leader.id} fence ${leader.fence ?? 'unknown'}` : 'none';
}

/**
 * `tenure leader`: prints the current leader of `--name` and, with `--watch`, every change until
 * SIGTERM/SIGINT (exit 0). It never campaigns.
 */
export async function leaderCommand(flags: LeaderFlags): Promise<number> {
  const say = statusLine(`leader ${flags.name}`);
  const stop = new AbortController();
  const removeHandlers = onStopSignals(() => stop.abort());
  try {
    let store;
    try {
      store = await openStore(flags, { ttlMs: 10_000, warn: say });
    } catch (e) {
      return startupExit(e, say);
    }
    const observer = store.candidate(flags.name, `tenure-leader-${process.pid}`);
    try {
      if (!flags.watch) {
        try {
          process.stdout.write(`${formatLeader(await observer.leader({ timeoutMs: flags.callTimeout }), flags.json)}\n`);
          return 0;
        } catch (e) {
          return startupExit(e, say);
        }
      }
      let shown: { leader: LeaderInfo | undefined } | undefined;
      while (!stop.signal.aborted) {
        try {
          for await (const leader of observer.observe({ signal: stop.signal })) {
            if (shown && sameLeader(shown.leader, leader)) continue; // a re-attached watch starts with the current leader again
            shown = { leader };
            process.stdout.write(`${formatLeader(leader, flags.json)}\n`);
          }
        } catch (e) {
          if (stop.signal.aborted) break;
          say(`watch interrupted (${e instanceof Error ? e.message : String(e)}); retrying`);
          await sleep(1000, stop.signal).catch(() => undefined);
        }
      }
      return 0;
    } finally {
      await within(observer.close().then(() => store.close()), 3000);
    }
  } finally {
    removeHandlers();
  }
}
