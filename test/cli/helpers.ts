import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pollValue } from '../helpers/wait.js';

/** Runs the CLI from the source tree as a user runs `tenure`, with its output captured. */
const main = new URL('../../src/cli/main.ts', import.meta.url).pathname;
export const childScript = new URL('./fixtures/child.mjs', import.meta.url).pathname;
/** A command that runs childScript as its own child (see fixtures/fork.mjs). */
export const forkScript = new URL('./fixtures/fork.mjs', import.meta.url).pathname;

export interface Tenure {
  readonly proc: ChildProcess;
  readonly stdout: () => string;
  readonly stderr: () => string;
  /** Exit code (or 128 + signal) and when the exit was seen, on the shared monotonic clock. */
  readonly exited: Promise<{ code: number; t: bigint }>;
}

export function tenure(args: string[], env: Record<string, string> = {}): Tenure {
  const proc = spawn(process.execPath, ['--import', 'tsx', main, ...args], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } });
  let out = '';
  let err = '';
  proc.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  proc.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  const exited = new Promise<{ code: number; t: bigint }>((resolve) =>
    proc.once('exit', (code, signal) => resolve({ code: code ?? 128 + (signal === 'SIGKILL' ? 9 : signal === 'SIGTERM' ? 15 : 0), t: process.hrtime.bigint() })),
  );
  return { proc, stdout: () => out, stderr: () => err, exited };
}

/** One line of the child fixture's log. */
export interface ChildEvent {
  event: 'start' | 'term' | 'exit';
  pid: number;
  id: string;
  fence: string;
  t: bigint;
  overlap?: boolean;
  code?: number;
}

/** A scratch dir holding the children's shared log and sentinel. */
export class ChildLog {
  readonly dir = mkdtempSync(join(tmpdir(), 'tenure-cli-'));
  readonly log = join(this.dir, 'log');
  readonly sentinel = join(this.dir, 'sentinel');

  /** The env that points the child fixture here. */
  env(extra: Record<string, string> = {}): Record<string, string> {
    return { LOG: this.log, SENTINEL: this.sentinel, ...extra };
  }

  events(): ChildEvent[] {
    if (!existsSync(this.log)) return [];
    return readFileSync(this.log, 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((l) => {
        const e = JSON.parse(l) as ChildEvent & { t: string };
        return { ...e, t: BigInt(e.t) };
      });
  }

  /** Waits for the n-th (1-based) event matching. */
  waitFor(pred: (e: ChildEvent) => boolean, n = 1, timeoutMs = 30_000): Promise<ChildEvent> {
    return pollValue(async () => this.events().filter(pred)[n - 1], timeoutMs);
  }

  remove(): void {
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** True while `pid` runs: it exists and is not a zombie (a killed orphan waits for init to reap it). */
export function isRunning(pid: number): boolean {
  try {
    return !/^State:\s+Z/m.test(readFileSync(`/proc/${pid}/status`, 'utf8'));
  } catch {
    return false;
  }
}

/** Its exit, within `timeoutMs` (else an error carrying what it wrote on stderr). */
export async function exitOf(t: Tenure, timeoutMs = 30_000): Promise<{ code: number; t: bigint }> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`tenure did not exit within ${timeoutMs} ms; stderr:\n${t.stderr()}`)), timeoutMs)));
  try {
    return await Promise.race([t.exited, late]);
  } finally {
    clearTimeout(timer);
  }
}

/** Kills what is still running of a test's processes. */
export async function killAll(list: Tenure[]): Promise<void> {
  for (const t of list) if (t.proc.exitCode === null && t.proc.signalCode === null) t.proc.kill('SIGKILL');
  await Promise.all(list.map((t) => t.exited));
}

export const ms = (a: bigint, b: bigint): number => Number(b - a) / 1e6;
