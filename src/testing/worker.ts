import { fork, type ChildProcess } from 'node:child_process';
import { ConfigError, ServerStartError } from '../core/errors.js';
import { monotonicClock } from '../core/clock.js';
import { requireOptions, requireString } from '../core/validate.js';
import { signalGroup, trackProcess, untrackProcess } from './registry.js';
import type { ExitInfo } from './process.js';

/**
 * An event a worker reported, stamped in the worker with `process.hrtime.bigint()`:
 * CLOCK_MONOTONIC on Linux, so stamps from different processes on one machine are comparable.
 */
export interface WorkerEvent<D = Record<string, unknown>> {
  /** What the worker reported (the first argument of `workerReport`). */
  type: string;
  /** Nanoseconds on the system-wide monotonic clock, taken in the worker when it reported. */
  t: bigint;
  /** The worker's pid. */
  pid: number;
  /** What it reported with it. */
  data: D;
}

const TAG = '__tenureWorkerEvent';

/** In a worker: reports an event to the parent, stamped with the monotonic clock now. */
export function workerReport(type: string, data: Record<string, unknown> = {}): bigint {
  const t = process.hrtime.bigint();
  process.send?.({ [TAG]: true, type, t, pid: process.pid, data });
  return t;
}

/** In a worker: calls `fn` for every message the parent sends with `WorkerHandle.send`. */
export function onParentMessage(fn: (msg: unknown) => void): () => void {
  const listener = (m: unknown): void => fn(m);
  process.on('message', listener);
  return () => process.off('message', listener);
}

/** Options of {@link spawnWorker}. */
export interface SpawnWorkerOptions {
  /** Extra environment variables. */
  env?: NodeJS.ProcessEnv;
  /** Pipe the worker's stdout/stderr to ours. @default false (kept in `output()`) */
  inheritOutput?: boolean;
}

/**
 * A candidate running in its own Node process, with IPC, so tests can SIGKILL and SIGSTOP it.
 * `.ts` files run through tsx.
 */
export class WorkerHandle implements AsyncDisposable {
  /** The worker's pid (its process group's id too). */
  readonly pid: number;
  /** Every event it reported so far, in arrival order. */
  readonly events: WorkerEvent[] = [];
  /** Resolves when it has exited. */
  readonly exited: Promise<ExitInfo>;
  #child: ChildProcess;
  #exit: ExitInfo | undefined;
  #waiters = new Set<() => void>();
  #output = '';

  /** @internal use {@link spawnWorker} */
  constructor(child: ChildProcess) {
    this.#child = child;
    this.pid = child.pid ?? -1;
    const capture = (d: Buffer): void => {
      this.#output = (this.#output + d.toString('utf8')).slice(-32 * 1024);
    };
    child.stdout?.on('data', capture);
    child.stderr?.on('data', capture);
    child.on('message', (m: unknown) => {
      if (m && typeof m === 'object' && (m as Record<string, unknown>)[TAG]) {
        const { type, t, pid, data } = m as WorkerEvent & Record<string, unknown>;
        this.events.push({ type, t, pid, data });
        for (const w of [...this.#waiters]) w();
      }
    });
    this.exited = new Promise((resolve) => {
      child.once('exit', (code, signal) => {
        const settle = (): void => {
          this.#exit = { code, signal };
          untrackProcess(this.pid);
          for (const w of [...this.#waiters]) w();
          resolve(this.#exit);
        };
        // 'exit' can come before the last messages the worker sent are read (its final 'done'
        // right before it exits): they are all read by the time its IPC channel disconnects.
        if (child.connected) child.once('disconnect', settle);
        else settle();
      });
    });
    if (this.pid > 0) trackProcess(this.pid, `node worker ${child.spawnargs.join(' ')}`.slice(0, 400));
  }

  /** True until it has exited. */
  get running(): boolean {
    return this.#exit === undefined;
  }

  /** What the worker printed (last 32 KiB). */
  output(): string {
    return this.#output;
  }

  /** Sends a message to the worker (received with `onParentMessage`). */
  send(msg: unknown): void {
    if (this.running && this.#child.connected) this.#child.send(msg as never);
  }

  /**
   * Resolves with the first event (already received or future) matching `match` — an event type
   * or a predicate — that comes at or after index `from`. Rejects when the worker exits first or
   * `timeoutMs` passes, with the worker's output in the message.
   */
  waitFor<D = Record<string, unknown>>(
    match: string | ((e: WorkerEvent) => boolean),
    options: { timeoutMs?: number; from?: number } = {},
  ): Promise<WorkerEvent<D>> {
    const pred = typeof match === 'string' ? (e: WorkerEvent) => e.type === match : match;
    const { timeoutMs = 20_000, from = 0 } = requireOptions('options', options, { timeoutMs: true, from: true });
    const what = typeof match === 'string' ? `'${match}'` : 'a matching event';
    return new Promise((resolve, reject) => {
      const check = (): void => {
        const e = this.events.slice(from).find(pred);
        if (e) {
          done();
          resolve(e as WorkerEvent<D>);
        } else if (this.#exit) {
          done();
          reject(new ServerStartError(`worker ${this.pid} exited (${JSON.stringify(this.#exit)}) before ${what}`, this.#output.slice(-4000)));
        }
      };
      const done = (): void => {
        clearTimeout(timer);
        this.#waiters.delete(check);
      };
      const timer = setTimeout(() => {
        done();
        reject(new ServerStartError(`worker ${this.pid}: no ${what} within ${timeoutMs} ms`, this.#output.slice(-4000)));
      }, timeoutMs);
      this.#waiters.add(check);
      check();
    });
  }

  #signal(sig: NodeJS.Signals): void {
    if (this.running) signalGroup(this.pid, sig);
  }

  /** SIGKILL, and wait for the exit. */
  async kill(): Promise<ExitInfo> {
    this.#signal('SIGKILL');
    return this.exited;
  }

  /** SIGSTOP: the worker freezes mid-instruction. Returns the monotonic stamp (ns) of the stop. */
  pause(): bigint {
    this.#signal('SIGSTOP');
    return process.hrtime.bigint();
  }

  /** SIGCONT. Returns the monotonic stamp (ns) of the resume. */
  resume(): bigint {
    this.#signal('SIGCONT');
    return process.hrtime.bigint();
  }

  /** SIGTERM, SIGKILL after `graceMs`; waits for the exit. Idempotent. */
  async stop(graceMs = 3000): Promise<ExitInfo> {
    if (!this.running) return this.exited;
    this.#signal('SIGCONT');
    this.#signal('SIGTERM');
    const timer = setTimeout(() => this.#signal('SIGKILL'), graceMs);
    try {
      return await this.exited;
    } finally {
      clearTimeout(timer);
    }
  }

  /** Same as `stop(1000)`, for `await using`. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.stop(1000).then(() => undefined);
  }
}

/**
 * Runs `file` in a separate Node process with IPC. The worker reports with
 * {@link workerReport}; the parent waits with `waitFor`, and can `kill()`, `pause()`, `resume()`.
 * Resolves once the process has spawned.
 */
export async function spawnWorker(file: string, args: string[] = [], options?: SpawnWorkerOptions): Promise<WorkerHandle> {
  requireString('file', file);
  if (!Array.isArray(args) || args.some((a) => typeof a !== 'string')) throw new ConfigError('args', 'must be an array of strings');
  const o = requireOptions('options', options, { env: true, inheritOutput: true });
  const execArgv = /\.(c|m)?ts$/.test(file) ? ['--import', 'tsx'] : [];
  const child = fork(file, args, {
    execArgv,
    env: { ...process.env, ...o.env },
    serialization: 'advanced', // bigint stamps survive IPC
    detached: true,
    stdio: o.inheritOutput ? ['ignore', 'inherit', 'inherit', 'ipc'] : ['ignore', 'pipe', 'pipe', 'ipc'],
  });
  const started = monotonicClock.now();
  await new Promise<void>((resolve, reject) => {
    child.once('spawn', () => resolve());
    child.once('error', (e) => reject(new ServerStartError(`worker ${file} failed to spawn after ${Math.round(monotonicClock.now() - started)} ms`, '', { cause: e })));
  });
  return new WorkerHandle(child);
}
