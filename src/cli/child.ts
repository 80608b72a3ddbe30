import { spawn, type ChildProcess } from 'node:child_process';
import { accessSync, constants as fsConstants, statSync } from 'node:fs';
import { constants } from 'node:os';
import { delimiter, join } from 'node:path';
import type { Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { EXIT } from './exit-codes.js';
import { canListGroup, groupMembers, signalGroup } from './group.js';

/** How a child ended, and the status the CLI exits with for it. */
export interface ChildExit {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  /** The shell's view: the exit code, or 128 + the signal's number. */
  readonly status: number;
  /** Why it could not start, when it did not. */
  readonly error?: string;
}

/** An executable file named `name` on PATH (or at that path), else why not. */
function findExecutable(name: string, path: string | undefined): { file?: string; error?: { code: 'ENOENT' | 'EACCES'; message: string } } {
  const candidates = name.includes('/') ? [name] : (path ?? '').split(delimiter).filter(Boolean).map((dir) => join(dir, name));
  let denied = false;
  for (const p of candidates) {
    try {
      if (!statSync(p).isFile()) continue;
    } catch {
      continue;
    }
    try {
      accessSync(p, fsConstants.X_OK);
      return { file: p };
    } catch {
      denied = true;
    }
  }
  return { error: { code: denied ? 'EACCES' : 'ENOENT', message: `${name}: ${denied ? 'permission denied' : 'command not found'}` } };
}

let setpriv: string | undefined | null = null;

/** Every wait for the group's end polls this often. */
const POLL_MS = 25;

/**
 * The command's own process group starts with a watchdog (a shell that ignores SIGTERM, SIGINT and
 * SIGHUP) reading fd 3, a socket whose other end only tenure holds: when tenure dies, even by
 * SIGKILL, the read ends and the watchdog SIGKILLs the whole group (`kill 0`), itself last. Being a
 * member, it also keeps the group's id from being reused while tenure may still signal it. Its
 * pid goes back on fd 3 (so the wait for the group's end does not count it); then the command is
 * exec'd in place of the shell (same pid: the group's leader), without fd 3.
 */
const LAUNCHER = `(trap '' TERM INT HUP QUIT; read _ <&3; kill -s KILL 0) & echo $! >&3; exec 3>&-; exec "$@"`;

/**
 * The command run while leading (or holding the lock), with its stdio passed through untouched.
 *
 * It runs in a process group (and session) of its own: demotion, `--grace` and forwarded signals
 * reach every process of it (`sh -c`, `npm run`, a script that forks), and a stop is over only
 * when the whole group is gone. If tenure itself is SIGKILLed, the kernel kills the command at
 * once (`setpriv --pdeathsig KILL`, where util-linux has it) and the group's watchdog kills the
 * rest. A process that leaves the group (`setsid`, a daemon's double fork) escapes both.
 */
export class Child {
  readonly pid: number | undefined;
  /** The command's own exit (the group's leader); the rest of the group may still run. */
  readonly exited: Promise<ChildExit>;
  readonly #proc: ChildProcess | undefined;
  /** Signals go to the whole group (POSIX) or to the child alone (Windows). */
  readonly #group: boolean;
  readonly #watchdog: Promise<number | undefined>;
  readonly #socket: Socket | undefined;
  #exit: ChildExit | undefined;
  #gone = false;
  #terminating = false;
  #stopping: Promise<ChildExit> | undefined;
  /** How many processes the command left running in its group when it exited (stopped by stop()). */
  strays = 0;

  constructor(argv: string[], env: NodeJS.ProcessEnv) {
    this.#group = process.platform !== 'win32';
    const found = findExecutable(argv[0]!, env.PATH);
    if (found.error) {
      // Said the way spawn would say it, without a shell's own message on the command's stderr.
      const status = found.error.code === 'ENOENT' ? EXIT.notFound : EXIT.cannotExecute;
      this.#exit = { code: status, signal: null, status, error: found.error.message };
      this.#gone = true;
      this.exited = Promise.resolve(this.#exit);
      this.#watchdog = Promise.resolve(undefined);
      this.pid = undefined;
      return;
    }
    let file = argv[0]!;
    let args = argv.slice(1);
    if (this.#group) [file, args] = ['/bin/sh', ['-c', LAUNCHER, 'tenure', ...argv]];
    if (process.platform === 'linux') {
      setpriv ??= findExecutable('setpriv', process.env.PATH).file;
      if (setpriv) [file, args] = [setpriv, ['--pdeathsig', 'KILL', '--', file, ...args]];
    }
    const proc = spawn(file, args, { stdio: this.#group ? ['inherit', 'inherit', 'inherit', 'pipe'] : 'inherit', env, detached: this.#group });
    this.#proc = proc;
    this.pid = proc.pid;
    this.#socket = this.#group ? (proc.stdio[3] as Socket | null) ?? undefined : undefined;
    this.#watchdog = new Promise<number | undefined>((resolve) => {
      const socket = this.#socket;
      if (!socket) return resolve(undefined);
      let line = '';
      socket.on('data', (d: Buffer) => {
        line += d.toString();
        if (line.includes('\n')) resolve(Number(line.split('\n')[0]) || undefined);
      });
      socket.on('error', () => undefined);
      socket.on('close', () => resolve(undefined));
    });
    this.exited = new Promise<ChildExit>((resolve) => {
      proc.once('error', (e: NodeJS.ErrnoException) => {
        if (proc.pid !== undefined) return; // started; 'exit' reports it
        const status = e.code === 'ENOENT' ? EXIT.notFound : EXIT.cannotExecute;
        this.#gone = true;
        this.#socket?.destroy();
        resolve((this.#exit = { code: status, signal: null, status, error: e.message }));
      });
      proc.once('exit', (code, signal) => {
        const status = code ?? 128 + (signal ? constants.signals[signal] : 0);
        resolve((this.#exit = { code, signal, status }));
      });
    });
  }

  /** True while anything of it runs: the command, or a process it left in its group. */
  get running(): boolean {
    return !this.#gone && this.pid !== undefined;
  }

  /** Sends a signal to its whole group (forwarding SIGTERM/SIGINT counts as asking it to stop). */
  signal(sig: NodeJS.Signals): void {
    if (!this.running) return;
    if (sig === 'SIGTERM' || sig === 'SIGINT') this.#terminating = true;
    if (this.#group) {
      signalGroup(this.pid!, sig);
      return;
    }
    try {
      this.#proc?.kill(sig);
    } catch {
      // exited meanwhile
    }
  }

  /**
   * Stops it: SIGTERM to the group (unless a stop signal was already forwarded), SIGKILL once
   * `graceMs` has passed; resolves with the command's exit once the whole group is gone. After the
   * command exited by itself, it stops what the command left running in its group the same way
   * (and returns at once when it left nothing). Idempotent.
   */
  stop(graceMs: number): Promise<ChildExit> {
    this.#stopping ??= (async () => {
      if (!this.running) return this.exited;
      if (this.#exit && this.#group) {
        const left = await this.#members();
        if (left.length === 0) return this.#end();
        this.strays = left.length;
      }
      if (!this.#terminating) this.signal('SIGTERM');
      const timer = setTimeout(() => this.signal('SIGKILL'), graceMs);
      try {
        await this.exited;
        while (this.#group && (await this.#members()).length > 0) await sleep(POLL_MS);
        return this.#end();
      } finally {
        clearTimeout(timer);
      }
    })();
    return this.#stopping;
  }

  /** The group's processes still running, but for the command's watchdog. */
  async #members(): Promise<number[]> {
    if (!canListGroup) {
      // No /proc: let the watchdog go (it SIGKILLs what is left) and wait for the group to empty.
      this.#socket?.destroy();
      return signalGroup(this.pid!, 0) ? [this.pid!] : [];
    }
    const watchdog = await Promise.race([this.#watchdog, sleep(1000).then(() => undefined)]);
    return groupMembers(this.pid!, new Set(watchdog === undefined ? [] : [watchdog]));
  }

  /** The group is gone: the watchdog may go too (its `kill 0` now reaches only itself). */
  #end(): ChildExit {
    this.#gone = true;
    this.#socket?.destroy();
    return this.#exit!;
  }
}

/**
 * After the command exited by itself: stops what it left running in its group (SIGTERM, SIGKILL
 * after `graceMs`) and says so; the lease is released only once the group is gone.
 */
export async function stopStrays(child: Child, graceMs: number, say: (text: string) => void): Promise<void> {
  await child.stop(graceMs);
  if (child.strays > 0) say(`it left ${child.strays} process(es) running in its group: stopped them (SIGTERM, SIGKILL after ${graceMs} ms)`);
}

/** How a child's end reads in a status line. */
export function describeExit(e: ChildExit): string {
  if (e.error) return `could not start (${e.error})`;
  return e.signal ? `was killed by ${e.signal}` : `exited with code ${e.code}`;
}
