import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, mkdtempSync, chownSync, type WriteStream } from 'node:fs';
import { tmpdir } from 'node:os';
import type { Socket } from 'node:net';
import { join } from 'node:path';
import { StateError } from '../core/errors.js';
import { allGone, groupMembers, groupStopped, signalGroup, trackDir, trackProcess, untrackProcess } from './registry.js';

/** How a child process ended. */
export interface ExitInfo {
  /** The exit code, when it exited by itself. */
  code: number | null;
  /** The signal that killed it, when one did. */
  signal: NodeJS.Signals | null;
}

export interface SpawnSpec {
  command: string;
  args: string[];
  cwd?: string;
  env?: NodeJS.ProcessEnv;
  /** Run as this user (e.g. Postgres refuses root). */
  uid?: number;
  gid?: number;
  /** Append stdout and stderr here. */
  logFile: string;
  /** Signal every descendant too, not only the process group (servers whose children setsid). */
  signalDescendants?: boolean;
}

const TAIL_BYTES = 16 * 1024;

/**
 * One spawned server process, leader of its own process group so that pause/resume/kill reach
 * every process the server forks (Postgres backends, for one). Output goes to a log file and a
 * tail kept in memory for error messages.
 */
export class ManagedProcess {
  readonly pid: number;
  readonly #signalDescendants: boolean;
  readonly exited: Promise<ExitInfo>;
  #child: ChildProcess;
  #exit: ExitInfo | undefined;
  #tail = '';
  #log: WriteStream;

  private constructor(spec: SpawnSpec) {
    this.#signalDescendants = spec.signalDescendants ?? false;
    this.#log = createWriteStream(spec.logFile, { flags: 'a' });
    this.#child = spawn(spec.command, spec.args, {
      cwd: spec.cwd,
      env: spec.env ?? process.env,
      uid: spec.uid,
      gid: spec.gid,
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const onData = (chunk: Buffer): void => {
      if (!this.#log.writableEnded) this.#log.write(chunk);
      this.#tail = (this.#tail + chunk.toString('utf8')).slice(-TAIL_BYTES);
    };
    this.#child.stdout?.on('data', onData);
    this.#child.stderr?.on('data', onData);
    this.exited = new Promise<ExitInfo>((resolve) => {
      const done = (info: ExitInfo): void => {
        if (this.#exit) return;
        this.#exit = info;
        if (this.#child.pid !== undefined) untrackProcess(this.#child.pid);
        resolve(info);
      };
      this.#child.once('exit', (code, signal) => done({ code, signal }));
      // Output may still drain after 'exit'; the log closes once every stdio stream has.
      this.#child.once('close', () => this.#log.end());
      this.#child.once('error', (err) => {
        this.#tail += `\n[spawn error] ${err.message}`;
        done({ code: -1, signal: null });
        this.#log.end();
      });
    });
    this.pid = this.#child.pid ?? -1;
    if (this.pid > 0) trackProcess(this.pid, `${spec.command} ${spec.args.join(' ')}`.slice(0, 400));
    // The kit must never keep the test process alive by itself.
    this.#child.unref();
    (this.#child.stdout as Socket | null)?.unref();
    (this.#child.stderr as Socket | null)?.unref();
  }

  static spawn(spec: SpawnSpec): ManagedProcess {
    return new ManagedProcess(spec);
  }

  /** True until the process has exited. */
  get running(): boolean {
    return this.#exit === undefined && this.pid > 0;
  }

  /** The last ~16 KiB the process printed. */
  tail(): string {
    return this.#tail;
  }

  /** Sends `sig` to the whole process group. */
  signal(sig: NodeJS.Signals): void {
    if (this.running) signalGroup(this.pid, sig, this.#signalDescendants);
  }

  /** SIGSTOPs the group and returns once every thread in it has stopped (at most `waitMs`). */
  async pause(waitMs = 10_000): Promise<void> {
    this.signal('SIGSTOP');
    const until = performance.now() + waitMs;
    while (this.running && !groupStopped(this.pid, this.#signalDescendants)) {
      if (performance.now() > until) throw new StateError(`pid ${this.pid}: not stopped ${waitMs} ms after SIGSTOP`);
      await new Promise((r) => setTimeout(r, 1));
    }
  }

  /**
   * SIGKILLs the group and waits for the exit of every process of it (at most `waitMs` past the
   * leader's): a Postgres backend can outlive its SIGKILLed postmaster by a moment, still attached
   * to the old shared memory, and a server started at once on the same data dir refused to start
   * ("pre-existing shared memory block is still in use").
   */
  async kill(waitMs = 5000): Promise<ExitInfo> {
    const members = this.running ? groupMembers(this.pid, this.#signalDescendants) : [];
    this.signal('SIGCONT');
    this.signal('SIGKILL');
    const exit = await keepAlive(this.exited);
    const until = performance.now() + waitMs;
    while (!allGone(members) && performance.now() < until) await keepAlive(new Promise((r) => setTimeout(r, 5)));
    return exit;
  }

  /** SIGTERM, then SIGKILL after `graceMs`; waits for the exit. */
  async stop(graceMs = 3000): Promise<ExitInfo> {
    if (!this.running) return this.exited;
    this.signal('SIGCONT');
    this.signal('SIGTERM');
    const timer = setTimeout(() => this.signal('SIGKILL'), graceMs);
    try {
      return await keepAlive(this.exited);
    } finally {
      clearTimeout(timer);
    }
  }
}

/**
 * Keeps the event loop alive until `p` settles. Children are unref'd so a forgotten server never
 * holds a test process open, but an awaited stop must still finish before the process exits.
 */
export async function keepAlive<T>(p: Promise<T>): Promise<T> {
  const timer = setInterval(() => undefined, 60_000);
  try {
    return await p;
  } finally {
    clearInterval(timer);
  }
}

/**
 * Makes a temp dir that is removed at exit (and by `reapOrphans` if its owner dies).
 * `base` defaults to the system temp dir; etcd uses `/dev/shm` when present.
 */
export function makeTempDir(prefix: string, base = tmpdir(), owner?: { uid: number; gid: number }): string {
  const dir = mkdtempSync(join(base, `tenure-${prefix}-`));
  trackDir(dir);
  if (owner) chownSync(dir, owner.uid, owner.gid);
  return dir;
}
