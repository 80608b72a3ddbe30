import { processTable, statFields } from '../core/proc.js';

/**
 * The command's process group, as the kernel sees it (Linux /proc): every process that is
 * still running in it. A zombie is not running (a killed orphan may wait a while for init to
 * reap it), and `ignore` (the group's own watchdog) does not count.
 */
export function groupMembers(pgid: number, ignore: ReadonlySet<number>): number[] {
  return processTable()
    .filter((p) => p.pgrp === pgid && p.state !== 'Z' && p.state !== 'X' && !ignore.has(p.pid))
    .map((p) => p.pid);
}

/** True when /proc can tell group members apart (Linux). */
export const canListGroup = statFields('/proc/self/stat') !== undefined;

/** Sends `sig` (0: none, only the check) to every process of group `pgid`; false when none is left. */
export function signalGroup(pgid: number, sig: NodeJS.Signals | 0): boolean {
  try {
    process.kill(-pgid, sig);
    return true;
  } catch {
    return false; // ESRCH: no process left in it
  }
}
