import { spawn, type ChildProcess } from 'node:child_process';

/** One JSON line an example printed. */
export type Line = { event: string; id: string; fence?: string; reason?: string; [k: string]: unknown };

/** Runs an example (`node --import tsx <file> …args`) as a user does, collecting the JSON lines it prints. */
export function runExample(file: string, args: string[]): { child: ChildProcess; lines: Line[] } {
  const child = spawn(process.execPath, ['--import', 'tsx', file, ...args], { stdio: ['ignore', 'pipe', 'inherit'] });
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
