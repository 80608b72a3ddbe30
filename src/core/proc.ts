import { readdirSync, readFileSync } from 'node:fs';

/**
 * The process table as Linux's /proc shows it, read in one pass: used by the CLI (the command's
 * process group) and the test kit (a server's group and descendants). Empty where /proc is not.
 */

/** The fields of a /proc stat file after "pid (comm)" (comm may hold spaces and parentheses). */
export function statFields(path: string): string[] | undefined {
  try {
    const stat = readFileSync(path, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  } catch {
    return undefined;
  }
}

export interface ProcEntry {
  pid: number;
  ppid: number;
  pgrp: number;
  /** R, S, D, T, Z (a zombie: exited, not yet reaped), X, … */
  state: string;
}

/** Every process's state, parent and process group, from one pass over /proc (empty without it). */
export function processTable(): ProcEntry[] {
  let entries: string[];
  try {
    entries = readdirSync('/proc');
  } catch {
    return [];
  }
  const out: ProcEntry[] = [];
  for (const e of entries) {
    if (!/^\d+$/.test(e)) continue;
    // fields[0] is field 3 (state), fields[1] field 4 (ppid), fields[2] field 5 (process group).
    const fields = statFields(`/proc/${e}/stat`);
    if (fields) out.push({ pid: Number(e), ppid: Number(fields[1]), pgrp: Number(fields[2]), state: fields[0]! });
  }
  return out;
}
