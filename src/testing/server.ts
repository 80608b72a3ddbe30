import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { ClosedError, ServerStartError } from '../core/errors.js';
import { sleep } from '../core/abort.js';
import { monotonicClock } from '../core/clock.js';
import { requireOptions } from '../core/validate.js';
import { ManagedProcess, keepAlive, makeTempDir, type ExitInfo, type SpawnSpec } from './process.js';
import { removeDir } from './registry.js';

/** What every server and cluster handle of the kit can do to its real processes. */
export interface FaultTarget {
  /** SIGKILL: the process dies at once; data stays for `restart()`. */
  kill(): Promise<void>;
  /** SIGSTOP: the process freezes, connections stay open and nothing answers; resolves once every thread has stopped. */
  pause(): Promise<void>;
  /** SIGCONT after `pause()`. */
  resume(): Promise<void>;
  /** Ends the process (if running) and starts it again on the same ports and data. */
  restart(options?: RestartOptions): Promise<void>;
}

export interface RestartOptions {
  /** End with SIGKILL (a crash) instead of a clean shutdown. @default false */
  hard?: boolean;
}

type State = 'new' | 'starting' | 'running' | 'paused' | 'down' | 'stopped';

export const PORT_CLASH = /address already in use|EADDRINUSE|could not bind|bind: address|Could not create server socket|BindException/i;

/**
 * Base of every single-process server handle: owns the process, its data dir, readiness and the
 * fault operations. Subclasses say how to spawn and how to probe.
 */
export abstract class LocalServer implements FaultTarget, AsyncDisposable {
  /** Short name used in dirs, logs and errors, e.g. `etcd-n1`. */
  abstract readonly name: string;
  #proc: ManagedProcess | undefined;
  #state: State = 'new';
  #dir: string | undefined;
  #ownsDir = true;
  #lastTail = '';

  /** How long start-up may take before it fails with the log. */
  protected readyTimeoutMs = 30_000;
  /** The signal for a clean shutdown. */
  protected stopSignal: NodeJS.Signals = 'SIGTERM';
  /** How many times a first start may retry on fresh ports after a port clash. */
  protected portRetries = 3;
  /** Whether `stop()` shuts down cleanly (Postgres: so it frees its shared memory) or SIGKILLs. */
  protected gracefulStop = false;

  /** Where this server keeps its data (and its log, `server.log`). */
  get dir(): string {
    if (!this.#dir) throw new ClosedError(`${this.name} (not started)`);
    return this.#dir;
  }

  /** True while the process runs (paused counts as running). */
  get running(): boolean {
    return this.#state === 'running' || this.#state === 'paused';
  }

  /** True while SIGSTOPped. */
  get paused(): boolean {
    return this.#state === 'paused';
  }

  /** The server process's PID while it runs. */
  get pid(): number | undefined {
    return this.running ? this.#proc?.pid : undefined;
  }

  /** The tail of the server's output (the current or last process). */
  log(): string {
    return this.#proc?.tail() ?? this.#lastTail;
  }

  /** Chooses ports (called before the first start, and again after a port clash). */
  protected abstract allocatePorts(): Promise<void>;
  /** Fills a fresh data dir before the first start. */
  protected async initDataDir(_dir: string): Promise<void> {}
  /** The command to run. */
  protected abstract spawnSpec(dir: string): SpawnSpec;
  /** One readiness check; false or a rejection means "not yet". */
  protected abstract probe(): Promise<boolean>;
  /** Base dir for the data dir. @default the system temp dir */
  protected tempBase(): string | undefined {
    return undefined;
  }
  /** The user to own the data dir and run the server (Postgres refuses root). */
  protected runAs(): { uid: number; gid: number } | undefined {
    return undefined;
  }

  /** @internal Removes the member's `data` dir and lays it out afresh (a cluster's retry). */
  async wipeData(): Promise<void> {
    rmSync(join(this.dir, 'data'), { recursive: true, force: true });
    await this.initDataDir(this.dir);
  }

  /** Lets a cluster give a member a dir it manages. */
  protected useDir(dir: string): void {
    this.#dir = dir;
    this.#ownsDir = false;
  }

  /** Starts the server and resolves once it answers. Resolves at once when already running. */
  async start(): Promise<this> {
    if (this.#state === 'stopped') throw new ClosedError(this.name);
    if (this.running) return this;
    if (this.#state === 'starting') throw new ServerStartError(`${this.name}: start() while already starting`, '');
    const first = this.#state === 'new';
    this.#state = 'starting';
    try {
      if (first) {
        await this.allocatePorts();
        if (!this.#dir) this.#dir = makeTempDir(this.name.replace(/[^a-z0-9-]/gi, ''), this.tempBase(), this.runAs());
        await this.initDataDir(this.#dir);
      }
      for (let attempt = 0; ; attempt++) {
        try {
          await this.#spawnAndWait();
          break;
        } catch (e) {
          const clash = PORT_CLASH.test(this.log());
          if (!first || !clash || attempt >= this.portRetries) throw e;
          await this.allocatePorts();
        }
      }
      this.#state = 'running';
      return this;
    } catch (e) {
      this.#state = 'down';
      throw e;
    }
  }

  async #spawnAndWait(): Promise<void> {
    const spec = this.spawnSpec(this.dir);
    const runAs = this.runAs();
    const proc = ManagedProcess.spawn({ ...spec, ...(runAs ?? {}), logFile: spec.logFile ?? join(this.dir, 'server.log') });
    this.#proc = proc;
    let exit: ExitInfo | undefined;
    void proc.exited.then((x) => (exit = x));
    const deadline = monotonicClock.now() + this.readyTimeoutMs;
    // Tail lines for errors; the process object is unref'd, the probes keep the loop alive.
    while (monotonicClock.now() < deadline) {
      if (exit) {
        this.#lastTail = proc.tail();
        throw new ServerStartError(
          `${this.name}: exited during start-up (code ${exit.code}, signal ${exit.signal})`,
          proc.tail().slice(-4000),
        );
      }
      const ok = await this.probe().catch(() => false);
      if (ok) return;
      await sleep(40);
    }
    this.#lastTail = proc.tail();
    await proc.kill();
    throw new ServerStartError(`${this.name}: not ready within ${this.readyTimeoutMs} ms`, proc.tail().slice(-4000));
  }

  async kill(): Promise<void> {
    if (!this.running) return;
    const proc = this.#proc;
    this.#state = 'down';
    await proc?.kill();
  }

  async pause(): Promise<void> {
    if (this.#state !== 'running') return;
    this.#state = 'paused';
    await this.#proc?.pause();
  }

  async resume(): Promise<void> {
    if (this.#state !== 'paused') return;
    this.#proc?.signal('SIGCONT');
    this.#state = 'running';
  }

  /** Ends the process cleanly (SIGKILL after 3 s), keeping its data; `start()` brings it back. */
  async shutdown(): Promise<void> {
    if (!this.running) return;
    const proc = this.#proc;
    this.#state = 'down';
    await this.#graceful(proc);
  }

  async restart(options: RestartOptions = {}): Promise<void> {
    requireOptions('options', options, { hard: true });
    if (this.#state === 'stopped') throw new ClosedError(this.name);
    if (options.hard) await this.kill();
    else await this.shutdown();
    await this.start();
  }

  async #graceful(proc: ManagedProcess | undefined): Promise<void> {
    if (!proc?.running) return;
    proc.signal('SIGCONT');
    proc.signal(this.stopSignal);
    const timer = setTimeout(() => proc.signal('SIGKILL'), 3000);
    await keepAlive(proc.exited);
    clearTimeout(timer);
  }

  /**
   * Ends the server for good and removes its data dir. Idempotent. Uses SIGKILL where a clean
   * shutdown only costs time (an etcd leader handing off, say), a clean one where the server
   * would otherwise leak system resources (Postgres' shared memory).
   */
  async stop(): Promise<void> {
    if (this.#state === 'stopped') return;
    const proc = this.#proc;
    this.#state = 'stopped';
    if (proc) this.#lastTail = proc.tail();
    if (this.gracefulStop) await this.#graceful(proc);
    else await proc?.kill();
    if (this.#dir && this.#ownsDir) removeDir(this.#dir);
  }

  /** Same as `stop()`, for `await using`. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.stop();
  }
}
