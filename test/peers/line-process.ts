/**
 * A peer program (Curator's Java driver, etcdctl) as a child process whose stdout is read line by
 * line. Tracked by the kit's registry like every server, so nothing outlives its owner; each
 * child leads its own process group, so kill() reaches the JVM's or etcdctl's children too.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { signalGroup, trackProcess, untrackProcess } from '../../src/testing/registry.js';

export class LineProcess {
  readonly pid: number;
  /** Every stdout line so far, each with the process.hrtime.bigint() of its arrival. */
  readonly lines: { text: string; at: bigint }[] = [];
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  readonly #child: ChildProcess;
  #stderr = '';
  #waiters = new Set<() => void>();
  #done = false;

  constructor(command: string, args: string[], env?: NodeJS.ProcessEnv) {
    this.#child = spawn(command, args, { detached: true, stdio: ['pipe', 'pipe', 'pipe'], env: env ?? process.env });
    this.pid = this.#child.pid ?? -1;
    if (this.pid > 0) trackProcess(this.pid, `${command} ${args.join(' ')}`.slice(0, 400));
    createInterface({ input: this.#child.stdout! }).on('line', (text) => {
      this.lines.push({ text, at: process.hrtime.bigint() });
      this.#wake();
    });
    this.#child.stderr!.on('data', (d: Buffer) => (this.#stderr = (this.#stderr + d.toString()).slice(-8192)));
    this.#child.stdin!.on('error', () => undefined); // a killed peer's stdin is closed
    this.exited = new Promise((resolve) => {
      this.#child.once('exit', (code, signal) => {
        this.#done = true;
        untrackProcess(this.pid);
        this.#wake();
        resolve({ code, signal });
      });
    });
  }

  get running(): boolean {
    return !this.#done;
  }

  /** What the process printed on stderr (the last 8 KiB), for error messages. */
  get stderr(): string {
    return this.#stderr;
  }

  write(line: string): void {
    this.#child.stdin!.write(`${line}\n`);
  }

  /** Resolves with the first line (from index `from` on) that `match` accepts; rejects on exit or timeout. */
  async waitForLine(match: (text: string) => boolean, timeoutMs: number, from = 0): Promise<{ text: string; at: bigint; index: number }> {
    const end = performance.now() + timeoutMs;
    for (;;) {
      const index = this.lines.findIndex((l, i) => i >= from && match(l.text));
      if (index >= 0) return { ...this.lines[index]!, index };
      if (this.#done) throw new Error(`peer ${this.pid} exited before the expected line; stderr: ${this.#stderr}`);
      const left = end - performance.now();
      if (left <= 0) throw new Error(`peer ${this.pid}: no matching line within ${timeoutMs} ms; stdout: ${this.lines.map((l) => l.text).join(' | ')}; stderr: ${this.#stderr}`);
      await new Promise<void>((resolve) => {
        const t = setTimeout(done, left);
        function done(): void {
          clearTimeout(t);
          resolve();
        }
        this.#waiters.add(done);
      });
    }
  }

  /** Sends `sig` to the process group and waits for the exit. */
  async signal(sig: NodeJS.Signals): Promise<void> {
    if (this.#done) return;
    signalGroup(this.pid, sig);
    await this.exited;
  }

  /** SIGKILL: a crash, nothing released. */
  kill(): Promise<void> {
    return this.signal('SIGKILL');
  }

  #wake(): void {
    const ws = [...this.#waiters];
    this.#waiters.clear();
    for (const w of ws) w();
  }
}
