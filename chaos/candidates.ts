import { existsSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { spawnWorker, type HistoryOp, type WorkerHandle } from '../src/testing/index.js';
import type { ChaosStore } from './stores/index.js';
import type { WorkerConfig } from './worker/candidate.js';

const worker = new URL('./worker/candidate.ts', import.meta.url).pathname;

/** libfaketime, from the Debian package `faketime` (scripts/ensure-servers.sh installs it). */
export function findFaketime(): string | undefined {
  const base = '/usr/lib';
  for (const arch of existsSync(base) ? readdirSync(base) : []) {
    const lib = join(base, arch, 'faketime', 'libfaketime.so.1');
    if (existsSync(lib)) return lib;
  }
  return undefined;
}

interface Slot {
  slot: number;
  incarnation: number;
  handle: WorkerHandle;
  /** The process's name in the history. */
  name: string;
  /** How many of its events were collected. */
  cursor: number;
  /** Its libfaketime offset file, and the offset in minutes. */
  clockFile: string;
  clockMinutes: number;
  paused: boolean;
}

/**
 * The candidate processes of a run, one per slot; a killed slot is started again as a new
 * incarnation (a new name in the history). Collects every history entry they report, and knows
 * from those who holds a term right now, so the nemesis can aim at the holder.
 */
export class CandidatePool {
  readonly #slots: Slot[] = [];
  readonly #retired: Slot[] = [];
  readonly #open = new Map<string, bigint>();
  readonly ops: HistoryOp[] = [];
  /** Processes this pool ended itself (killed, or stopped at the end): any other exit is a crash. */
  readonly #ended = new Set<string>();
  /** Candidate processes that exited on their own (a bug: an unhandled error, say), with what they printed last. */
  readonly crashes: { name: string; code: number | null; signal: NodeJS.Signals | null; output: string }[] = [];

  constructor(
    private readonly store: ChaosStore,
    private readonly base: Omit<WorkerConfig, 'id' | 'store'>,
    private readonly dir: string,
    private readonly faketime: string,
  ) {}

  get size(): number {
    return this.#slots.length;
  }

  name(slot: number): string {
    return this.#at(slot).name;
  }

  proxies(slot: number) {
    return this.store.proxies(slot);
  }

  async spawn(slot: number): Promise<void> {
    const prev = this.#slots[slot];
    if (prev) this.#retired.push(prev);
    const incarnation = (prev?.incarnation ?? 0) + 1;
    const name = `c${slot}.${incarnation}`;
    const clockFile = prev?.clockFile ?? join(this.dir, `clock-${slot}`);
    const clockMinutes = prev?.clockMinutes ?? 0;
    if (!prev) writeFileSync(clockFile, '+0\n');
    const cfg: WorkerConfig = { ...this.base, id: name, store: this.store.endpoints(slot) };
    const handle = await spawnWorker(worker, [], {
      env: {
        CHAOS_WORKER: JSON.stringify(cfg),
        // The wall clock of this process steps when the nemesis writes a new offset; the
        // monotonic clock (hrtime, performance.now) is left alone.
        LD_PRELOAD: this.faketime,
        FAKETIME_TIMESTAMP_FILE: clockFile,
        FAKETIME_NO_CACHE: '1',
        FAKETIME_DONT_FAKE_MONOTONIC: '1',
      },
    });
    this.#slots[slot] = { slot, incarnation, handle, name, cursor: 0, clockFile, clockMinutes, paused: false };
    void handle.exited.then(({ code, signal }) => {
      if (!this.#ended.has(name)) this.crashes.push({ name, code, signal, output: handle.output().slice(-4000) });
    });
    await handle.waitFor('ready', { timeoutMs: 60_000 });
  }

  /** Moves every new history entry from the processes into `ops`. */
  drain(): void {
    for (const s of [...this.#retired, ...this.#slots]) {
      const evs = s.handle.events;
      for (; s.cursor < evs.length; s.cursor++) {
        const e = evs[s.cursor]!;
        if (e.type !== 'op') continue;
        const op = e.data.op as HistoryOp;
        this.ops.push(op);
        // (one open term per process, or per process and shard in the shard kind)
        const key = op.shard === undefined ? op.process : `${op.process}|${op.shard}`;
        if (op.f === 'acquire' && op.type === 'ok' && op.fence !== undefined) this.#open.set(key, op.fence);
        else if (op.f === 'term-end' && this.#open.get(key) === op.fence) this.#open.delete(key);
      }
    }
  }

  /** The slot whose process holds a term by its own reports (running, not paused), if any. */
  holder(): number | undefined {
    this.drain();
    const holding = new Set([...this.#open.keys()].map((k) => k.split('|')[0]));
    return this.#slots.find((s) => s.handle.running && !s.paused && holding.has(s.name))?.slot;
  }

  /** True once some process other than `except` was granted a term after `since`. */
  grantedSince(since: bigint, except: string): boolean {
    this.drain();
    return this.ops.some((op) => op.f === 'acquire' && op.type === 'ok' && op.t > since && op.process !== except);
  }

  /** The shard kind: the shards whose term the slot's process holds now, by its own reports. */
  shardsOf(slot: number): string[] {
    this.drain();
    const prefix = `${this.#at(slot).name}|`;
    return [...this.#open.keys()].filter((k) => k.startsWith(prefix)).map((k) => k.slice(prefix.length));
  }

  /**
   * The shard kind: a check, true once each of `shards` was granted to some process other than
   * `except` after `since` (it reads only the entries collected from its making on).
   */
  regranted(since: bigint, except: string, shards: readonly string[]): () => boolean {
    this.drain();
    const left = new Set(shards);
    let cursor = this.ops.length;
    return () => {
      this.drain();
      for (; cursor < this.ops.length; cursor++) {
        const op = this.ops[cursor]!;
        if (op.f === 'acquire' && op.type === 'ok' && op.t > since && op.process !== except && op.shard !== undefined) left.delete(op.shard);
      }
      return left.size === 0;
    };
  }

  /** SIGKILL; the process's open terms end with it. */
  async kill(slot: number): Promise<void> {
    const s = this.#at(slot);
    this.#ended.add(s.name);
    await s.handle.kill();
    this.drain();
    for (const k of [...this.#open.keys()]) if (k === s.name || k.startsWith(`${s.name}|`)) this.#open.delete(k);
  }

  /** The shard kind: the member leaves the group (its shards drained and handed over); resolves once it has. */
  async leave(slot: number): Promise<void> {
    const s = this.#at(slot);
    const from = s.handle.events.length;
    s.handle.send({ cmd: 'leave' });
    await s.handle.waitFor('left', { from, timeoutMs: 60_000 });
  }

  /** The shard kind: the member that left joins again. */
  join(slot: number): void {
    this.#at(slot).handle.send({ cmd: 'join' });
  }

  pause(slot: number): void {
    const s = this.#at(slot);
    s.paused = true;
    s.handle.pause();
  }

  resume(slot: number): void {
    const s = this.#at(slot);
    s.handle.resume();
    s.paused = false;
  }

  /** Steps the slot's wall clock by `minutes`; returns the new total offset. */
  jumpClock(slot: number, minutes: number): number {
    const s = this.#at(slot);
    s.clockMinutes += minutes;
    writeFileSync(s.clockFile, `${s.clockMinutes >= 0 ? '+' : ''}${s.clockMinutes}m\n`);
    return s.clockMinutes;
  }

  /**
   * Asks every process to leave (resign, close its sessions) and waits; one that does not exit
   * within `graceMs` is SIGKILLed and reported to `onKilled`.
   */
  async stopAll(graceMs: number, onKilled: (name: string) => void): Promise<void> {
    await Promise.all(
      this.#slots.map(async (s) => {
        if (s.paused) this.resume(s.slot);
        this.#ended.add(s.name);
        s.handle.send({ cmd: 'stop' });
        const exited = await Promise.race([s.handle.exited.then(() => true), new Promise<false>((r) => setTimeout(() => r(false), graceMs))]);
        if (!exited) {
          onKilled(s.name);
          await s.handle.kill();
        }
      }),
    );
    this.drain();
  }

  /** Kills whatever still runs (cleanup on error). */
  async killAll(): Promise<void> {
    for (const s of [...this.#retired, ...this.#slots]) this.#ended.add(s.name);
    await Promise.all([...this.#retired, ...this.#slots].map((s) => s.handle.kill()));
  }

  #at(slot: number): Slot {
    const s = this.#slots[slot];
    if (!s) throw new Error(`no candidate in slot ${slot}`);
    return s;
  }
}
