import { spawn, type ChildProcess } from 'node:child_process';

/** One JSON line an example printed. */
export type Line = { event: string; id: string; fence?: string; reason?: string; [k: string]: unknown };

/** Listener-leak warnings the examples run since the last {@link takeLeakWarnings} printed. */
const leakWarnings: string[] = [];

/**
 * The `MaxListenersExceededWarning`s printed by the examples run since the last call (and forgets
 * them): an example whose loop adds a listener per unit of work to a signal that outlives it (a
 * term's) prints one once 11 pile up, and users copy examples.
 */
export function takeLeakWarnings(): string[] {
  return leakWarnings.splice(0);
}

/**
 * Runs an example (`node --import tsx <file> …args`) as a user does, collecting the JSON lines it
 * prints; its stderr is passed through, and its listener-leak warnings kept for {@link takeLeakWarnings}.
 */
export function runExample(file: string, args: string[]): { child: ChildProcess; lines: Line[] } {
  const child = spawn(process.execPath, ['--import', 'tsx', file, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let err = '';
  child.stderr!.on('data', (d: Buffer) => {
    process.stderr.write(d);
    err += d.toString();
    for (let i = err.indexOf('\n'); i >= 0; i = err.indexOf('\n')) {
      if (err.slice(0, i).includes('MaxListenersExceededWarning')) leakWarnings.push(`${file}: ${err.slice(0, i)}`);
      err = err.slice(i + 1);
    }
  });
  const lines: Line[] = [];
  let buf = '';
  child.stdout!.on('data', (d: Buffer) => {
    buf += d.toString();
    for (let i = buf.indexOf('\n'); i >= 0; i = buf.indexOf('\n')) {
      lines.push(JSON.parse(buf.slice(0, i)) as Line);
      buf = buf.slice(i + 1);
    }
  });
  return { child, lines };
}

/** Resolves with the exit code once the process has exited. */
export const exited = (c: ChildProcess): Promise<number | null> => (c.exitCode !== null ? Promise.resolve(c.exitCode) : new Promise((r) => c.once('exit', (code) => r(code))));
