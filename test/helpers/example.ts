import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { afterEach, expect } from 'vitest';

/** One JSON line an example printed. */
export type Line = { event: string; id: string; fence?: string; reason?: string; [k: string]: unknown };

/** Listener-leak warnings printed by the examples this test file ran, not yet checked. */
const leakWarnings: string[] = [];

// Every test that runs an example fails on a `MaxListenersExceededWarning` from it: an example
// whose loop adds a listener per unit of work to a signal that outlives it (a term's) prints one
// once 11 pile up, and users copy examples. (A test file importing this helper gets the check.)
afterEach(() => expect(leakWarnings.splice(0)).toEqual([]));

/**
 * Runs an example (`node --import tsx <file> …args`) as a user does, collecting the JSON lines it
 * prints; its stderr is passed through, and a listener-leak warning in it fails the test.
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
