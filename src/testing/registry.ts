import { mkdirSync, readdirSync, readFileSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import { processTable, statFields } from '../core/proc.js';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * Tracks every child process and temp dir the kit creates, so that nothing outlives its owner:
 * - in-process: on `exit`, SIGINT, SIGTERM and SIGHUP every live child's process group is
 *   SIGKILLed and every temp dir removed, synchronously;
 * - across processes: each child and dir is also recorded in a file under the system temp dir,
 *   and {@link reapOrphans} (run by a test runner's global teardown) ends whatever a dead owner
 *   (e.g. a test worker killed on timeout) left behind.
 */

const recordDir = join(tmpdir(), 'tenure-kit-records');

interface ProcessRecord {
  kind: 'process';
  owner: number;
  pid: number;
  /** Start time from /proc/<pid>/stat, so a reused PID is never killed. */
  startTime: string;
  command: string;
}
interface DirRecord {
  kind: 'dir';
  owner: number;
  path: string;
}
type Record_ = ProcessRecord | DirRecord;

const liveGroups = new Map<number, string>();
const liveDirs = new Map<string, string>();
let hooked = false;

function recordFile(name: string): string {
  return join(recordDir, name);
}

function writeRecord(name: string, rec: Record_): void {
  try {
    mkdirSync(recordDir, { recursive: true, mode: 0o1777 });
    writeFileSync(recordFile(name), JSON.stringify(rec));
  } catch {
    // Recording is a safety net; the in-process cleanup still runs.
  }
}

function removeRecord(name: string): void {
  try {
    unlinkSync(recordFile(name));
  } catch {
    // already gone
  }
}

/** `/proc/<pid>/stat` field 22 (start time in clock ticks), or undefined when not running. */
export function processStartTime(pid: number): string | undefined {
  const fields = statFields(`/proc/${pid}/stat`);
  // fields[0] is field 3 (state); start time is field 22 → index 19.
  return fields === undefined || fields[0] === 'Z' ? undefined : fields[19];
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Sends `sig` to the process group led by `pid` (or to `pid` alone when it leads none), and with
 * `withDescendants` to every descendant too: Postgres backends call setsid(), leaving the
 * server's group, so the group alone would SIGSTOP the postmaster and leave every backend
 * answering.
 */
export function signalGroup(pid: number, sig: NodeJS.Signals, withDescendants = false): void {
  if (withDescendants) {
    for (const child of descendants(pid)) {
      try {
        process.kill(child, sig);
      } catch {
        // already gone
      }
    }
  }
  try {
    process.kill(-pid, sig);
  } catch {
    try {
      process.kill(pid, sig);
    } catch {
      // already gone
    }
  }
}

/**
 * True once every thread of every process {@link signalGroup} reaches is stopped (or gone).
 * kill(2) returns when SIGSTOP is queued, not when it has taken effect: a thread running on
 * another core goes on until it next enters the kernel, and an etcd that was sent SIGSTOP
 * answered a request sent after it, 3 times in 150.
 */
export function groupStopped(pid: number, withDescendants = false): boolean {
  const table = processTable();
  const members = new Set<number>(withDescendants ? descendants(pid, table) : []);
  for (const p of table) if (p.pgrp === pid) members.add(p.pid);
  for (const member of members) {
    let tasks: string[];
    try {
      tasks = readdirSync(`/proc/${member}/task`);
    } catch {
      continue; // exited meanwhile
    }
    for (const t of tasks) {
      const state = statFields(`/proc/${member}/task/${t}/stat`)?.[0];
      if (state !== undefined && !'TtZX'.includes(state)) return false;
    }
  }
  return true;
}

/** Every live descendant of `pid` (empty where there is none). */
/**
 * The processes {@link signalGroup} reaches now, each with its start time, for {@link allGone}.
 * Read before a kill: once the leader is gone its setsid() children are init's, no longer found
 * through it.
 */
export function groupMembers(pid: number, withDescendants = false): [pid: number, start: string][] {
  const table = processTable();
  const pids = new Set<number>(withDescendants ? descendants(pid, table) : []);
  for (const p of table) if (p.pgrp === pid) pids.add(p.pid);
  const out: [number, string][] = [];
  for (const p of pids) {
    const start = processStartTime(p);
    if (start !== undefined) out.push([p, start]);
  }
  return out;
}

/** True once none of `members` runs any more (exited, a zombie, or its pid taken by another process). */
export function allGone(members: readonly [pid: number, start: string][]): boolean {
  return members.every(([p, start]) => processStartTime(p) !== start);
}

function descendants(pid: number, table = processTable()): number[] {
  const out: number[] = [];
  const walk = (p: number): void => {
    for (const entry of table) {
      if (entry.ppid === p) {
        out.push(entry.pid);
        walk(entry.pid);
      }
    }
  };
  walk(pid);
  return out;
}

function killGroupSync(pid: number): void {
  signalGroup(pid, 'SIGKILL');
}

function cleanupAll(): void {
  for (const [pid, rec] of liveGroups) {
    killGroupSync(pid);
    removeRecord(rec);
  }
  liveGroups.clear();
  for (const [path, rec] of liveDirs) {
    try {
      rmSync(path, { recursive: true, force: true });
    } catch {
      // best effort at exit
    }
    removeRecord(rec);
  }
  liveDirs.clear();
}

function hook(): void {
  if (hooked) return;
  hooked = true;
  process.on('exit', cleanupAll);
  for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    const handler = (): void => {
      cleanupAll();
      process.removeListener(sig, handler);
      // Re-raise so the default behaviour (or the user's own handlers) still happens.
      if (process.listenerCount(sig) === 0) process.kill(process.pid, sig);
    };
    process.on(sig, handler);
  }
}

/** Registers a spawned child (the leader of its own process group). */
export function trackProcess(pid: number, command: string): void {
  hook();
  const name = `p-${process.pid}-${pid}.json`;
  liveGroups.set(pid, name);
  writeRecord(name, { kind: 'process', owner: process.pid, pid, startTime: processStartTime(pid) ?? '', command });
}

/** Forgets a child that has exited. */
export function untrackProcess(pid: number): void {
  const name = liveGroups.get(pid);
  if (name) removeRecord(name);
  liveGroups.delete(pid);
}

/** Registers a temp dir to remove at exit. */
export function trackDir(path: string): void {
  hook();
  const name = `d-${process.pid}-${path.replace(/[^A-Za-z0-9]/g, '_')}.json`;
  liveDirs.set(path, name);
  writeRecord(name, { kind: 'dir', owner: process.pid, path });
}

/** Removes a temp dir now and forgets it. */
export function removeDir(path: string): void {
  rmSync(path, { recursive: true, force: true });
  const name = liveDirs.get(path);
  if (name) removeRecord(name);
  liveDirs.delete(path);
}

/** What {@link reapOrphans} found and ended. */
export interface ReapReport {
  /** The processes it killed. */
  killed: {
    /** Its pid. */
    pid: number;
    /** Its command line. */
    command: string;
  }[];
  /** The temp dirs it removed. */
  removedDirs: string[];
}

/**
 * Ends child processes and removes temp dirs whose owning process is dead. Safe to run at any
 * time from any process: it never touches what a live owner still holds, and checks a
 * process's start time before killing it so a reused PID is left alone.
 */
export function reapOrphans(): ReapReport {
  const report: ReapReport = { killed: [], removedDirs: [] };
  let names: string[];
  try {
    names = readdirSync(recordDir);
  } catch {
    return report;
  }
  for (const name of names) {
    let rec: Record_;
    try {
      rec = JSON.parse(readFileSync(recordFile(name), 'utf8')) as Record_;
    } catch {
      continue;
    }
    if (alive(rec.owner) && rec.owner !== process.pid) continue;
    if (rec.owner === process.pid) {
      // Our own records: only stale ones (not live in this process).
      if (rec.kind === 'process' && liveGroups.has(rec.pid)) continue;
      if (rec.kind === 'dir' && liveDirs.has(rec.path)) continue;
    }
    if (rec.kind === 'process') {
      const st = processStartTime(rec.pid);
      if (st !== undefined && st === rec.startTime) {
        killGroupSync(rec.pid);
        report.killed.push({ pid: rec.pid, command: rec.command });
      }
    } else {
      try {
        rmSync(rec.path, { recursive: true, force: true });
        report.removedDirs.push(rec.path);
      } catch {
        continue;
      }
    }
    removeRecord(name);
  }
  return report;
}

/** Children and dirs this process currently holds (for leak checks in tests). */
export function liveResources(): { pids: number[]; dirs: string[] } {
  return { pids: [...liveGroups.keys()], dirs: [...liveDirs.keys()] };
}
