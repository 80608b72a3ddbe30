/**
 * Apache Curator 5.4 (Debian's libcurator-*-java) as a real peer: CuratorPeer.java, compiled
 * with javac on first use (cached by the source's hash), driven over stdin/stdout. The interop
 * tests and the bench both use this one driver.
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { LineProcess } from './line-process.js';

const JARS = ['curator-recipes', 'curator-framework', 'curator-client', 'zookeeper', 'zookeeper-jute', 'guava', 'slf4j-api', 'slf4j-nop'];
/** Curator's classpath as Debian installs it (scripts/ensure-servers.sh installs the packages). */
export const CURATOR_CLASSPATH = JARS.map((j) => `/usr/share/java/${j}.jar`).join(':');
const SOURCE = join(dirname(fileURLToPath(import.meta.url)), 'CuratorPeer.java');

let compiled: string | undefined;

/** The directory holding CuratorPeer.class, compiling it when the source changed. */
export function compileCuratorPeer(): string {
  if (compiled) return compiled;
  for (const jar of CURATOR_CLASSPATH.split(':')) {
    if (!existsSync(jar)) throw new Error(`${jar} is missing: run scripts/ensure-servers.sh (installs libcurator-recipes-java and friends)`);
  }
  const hash = createHash('sha256').update(readFileSync(SOURCE)).digest('hex').slice(0, 16);
  const dir = join(tmpdir(), `tenure-curator-peer-${hash}`);
  if (!existsSync(join(dir, 'CuratorPeer.class'))) {
    // Compile beside, then rename: two test files compiling at once never see half a class.
    const work = `${dir}.${process.pid}`;
    mkdirSync(work, { recursive: true });
    execFileSync('javac', ['-nowarn', '-cp', CURATOR_CLASSPATH, '-d', work, SOURCE], { stdio: ['ignore', 'ignore', 'pipe'] });
    try {
      renameSync(work, dir);
    } catch {
      rmSync(work, { recursive: true, force: true }); // another process won the race
    }
  }
  compiled = dir;
  return dir;
}

export type Reply = Record<string, unknown> & { id: number; error?: string };

/** One JVM with one CuratorFramework (one ZooKeeper session) and any number of recipe handles. */
export class CuratorPeer {
  readonly sessionId: string;
  readonly #proc: LineProcess;
  #next = 0;

  private constructor(proc: LineProcess, sessionId: string) {
    this.#proc = proc;
    this.sessionId = sessionId;
  }

  /** Starts the JVM and waits until its client is connected. */
  static async start(connectionString: string, options: { sessionTimeoutMs?: number } = {}): Promise<CuratorPeer> {
    const dir = compileCuratorPeer();
    const proc = new LineProcess('java', ['-Xmx256m', '-XX:+UseSerialGC', '-cp', `${dir}:${CURATOR_CLASSPATH}`, 'CuratorPeer', connectionString, String(options.sessionTimeoutMs ?? 10_000)]);
    try {
      const ready = await proc.waitForLine((l) => l.startsWith('{"ready"'), 30_000);
      return new CuratorPeer(proc, (JSON.parse(ready.text) as { sessionId: string }).sessionId);
    } catch (e) {
      await proc.kill();
      throw e;
    }
  }

  get pid(): number {
    return this.#proc.pid;
  }

  /**
   * Sends `command handle …args` and resolves with its reply. Commands on one handle run in
   * order on one Java thread; different handles run concurrently. Rejects with the Java error.
   */
  async call(command: string, handle: string, ...args: (string | number)[]): Promise<Reply> {
    const id = ++this.#next;
    const from = this.#proc.lines.length;
    this.#proc.write([id, command, handle, ...args].join(' '));
    const line = await this.#proc.waitForLine((l) => l.startsWith(`{"id":${id},`) || l === `{"id":${id}}`, 10 * 60_000, from);
    const reply = JSON.parse(line.text) as Reply;
    if (reply.error) throw new Error(`curator ${command}: ${reply.error}`);
    return reply;
  }

  /** SIGKILL: the JVM dies holding whatever it held; its session expires on the server. */
  kill(): Promise<void> {
    return this.#proc.kill();
  }

  /** Ends the JVM (stdin closed: it halts) and waits for it. */
  async close(): Promise<void> {
    await this.#proc.kill();
  }
}
