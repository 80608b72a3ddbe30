import { spawn, type ChildProcess } from 'node:child_process';
import { accessSync, constants as fsConstants } from 'node:fs';
import { constants } from 'node:os';
import { delimiter, join } from 'node:path';
import { EXIT } from './exit-codes.js';

/** How a child ended, and the status the CLI exits with for it. */
export interface ChildExit {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  /** The shell's view: the exit code, or 128 + the signal's number. */
  readonly status: number;
  /** Why it could not start, when it did not. */
  readonly error?: string;
}

/** `setpriv` (util-linux), when on PATH: it asks the kernel to SIGKILL the child if tenure dies. */
function findSetpriv(): string | undefined {
  if (process.platform !== 'linux') return undefined;
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    try {
      const p = join(dir, 'setpriv');
      accessSync(p, fsConstants.X_OK);
      return p;
    } catch {
      // not here
    }
  }
  return undefined;
}
let setpriv: string | undefined | null = null;

/**
 * The command run while leading (or holding the lock), with its stdio passed through untouched.
 * If tenure itself is SIGKILLed, the kernel kills the child too (`setpriv --pdeathsig KILL`, on
 * Linux): a child must not outlive the process that would have stopped it when the lease ended.
 */
export class Child {
  readonly pid: number | undefined;
  readonly exited: Promise<ChildExit>;
  readonly #proc: ChildProcess;
  #exit: ChildExit | undefined;
  #terminating = false;
  #stopping: Promise<ChildExit> | undefined;

  constructor(argv: string[], env: NodeJS.ProcessEnv) {
    if (setpriv === null) setpriv = findSetpriv();
    const [file, args] = setpriv ? [setpriv, ['--pdeathsig', 'KILL', '--', ...argv]] : [argv[0]!, argv.slice(1)];
    this.#proc = spawn(file, args, { stdio: 'inherit', env });
    this.pid = this.#proc.pid;
    this.exited = new Promise<ChildExit>((resolve) => {
      this.#proc.once('error', (e: NodeJS.ErrnoException) => {
        if (this.#proc.pid !== undefined) return; // started; 'exit' reports it
        const status = e.code === 'ENOENT' ? EXIT.notFound : EXIT.cannotExecute;
        resolve((this.#exit = { code: status, signal: null, status, error: e.message }));
      });
      this.#proc.once('exit', (code, signal) => {
        const status = code ?? 128 + (signal ? constants.signals[signal] : 0);
        resolve((this.#exit = { code, signal, status }));
      });
    });
  }

  /** True until it has exited. */
  get running(): boolean {
    return this.#exit === undefined && this.pid !== undefined;
  }

  /** Sends a signal (forwarding SIGTERM/SIGINT counts as asking it to stop). */
  signal(sig: NodeJS.Signals): void {
    if (!this.running) return;
    if (sig === 'SIGTERM' || sig === 'SIGINT') this.#terminating = true;
    try {
      this.#proc.kill(sig);
    } catch {
      // exited meanwhile
    }
  }

  /**
   * Stops it: SIGTERM (unless a stop signal was already forwarded), then SIGKILL once `graceMs`
   * has passed. Idempotent; resolves when it has exited.
   */
  stop(graceMs: number): Promise<ChildExit> {
    this.#stopping ??= (async () => {
      if (!this.running) return this.exited;
      if (!this.#terminating) this.signal('SIGTERM');
      const timer = setTimeout(() => this.signal('SIGKILL'), graceMs);
      try {
        return await this.exited;
      } finally {
        clearTimeout(timer);
      }
    })();
    return this.#stopping;
  }
}

/** How a child's end reads in a status line. */
export function describeExit(e: ChildExit): string {
  if (e.error) return `could not start (${e.error})`;
  return e.signal ? `was killed by ${e.signal}` : `exited with code ${e.code}`;
}
