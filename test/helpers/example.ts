import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';

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
  child.stderr!.on('data', (d: Buffer) => process.stderr.write(d));
  createInterface({ input: child.stderr! }).on('line', (line: string) => {
    if (line.includes('MaxListenersExceededWarning')) leakWarnings.push(`${file}: ${line}`);
  });
  const lines: Line[] = [];
  createInterface({ input: child.stdout! }).on('line', (line: string) => lines.push(JSON.parse(line) as Line));
  return { child, lines };
}

/** Resolves with the exit code once the process has exited. */
export const exited = (c: ChildProcess): Promise<number | null> => (c.exitCode !== null ? Promise.resolve(c.exitCode) : new Promise((r) => c.once('exit', (code) => r(code))));
