import { sleep } from '../src/core/abort.js';
import type { HistoryRecorder } from '../src/testing/index.js';
import type { CandidatePool } from './candidates.js';
import type { Rng } from './rng.js';
import type { StoreFault } from './stores/index.js';

/** The faults done to one candidate; the store adds its own (member-kill, cluster-restart, store-restart). */
export const CANDIDATE_FAULTS = ['kill', 'pause', 'blackhole', 'cut', 'delay', 'clock-jump'] as const;

/** How often each fault is drawn, relative to the others. */
const WEIGHTS: Record<string, number> = { kill: 2, pause: 3, blackhole: 2, cut: 1, delay: 1, 'clock-jump': 2 };
const STORE_WEIGHT = 1;

export interface NemesisOptions {
  rng: Rng;
  /** Records every fault (the nemesis's part of the history). */
  rec: HistoryRecorder;
  pool: CandidatePool;
  storeFaults: readonly StoreFault[];
  ttlMs: number;
  /** How long after a crash a new holder may take: the failover bound. */
  failoverBoundMs: number;
  /** Only these kinds, when given. */
  only?: readonly string[];
  /** Chance that a fault on a candidate hits the current holder. @default 0.75 */
  aimAtHolder?: number;
  /** One line per fault, for the run's log. */
  log?: (line: string) => void;
  /** The shard kind: the candidates are members of a group, and `leave` (a member leaves, then joins again) is a fault too. */
  members?: boolean;
}

/**
 * The nemesis: one fault at a time, each drawn from the seeded RNG (kind, target, duration),
 * healed before the next, with a quiet spell between. Faults on a candidate aim at the current
 * holder most of the time, since that is where safety is at stake.
 */
export class Nemesis {
  readonly #o: NemesisOptions;
  readonly #kinds: { kind: string; weight: number; run: () => Promise<void> }[];

  constructor(options: NemesisOptions) {
    this.#o = options;
    const candidate = CANDIDATE_FAULTS.map((kind) => ({ kind, weight: WEIGHTS[kind]!, run: () => this.#candidateFault(kind) }));
    if (options.members) candidate.push({ kind: 'leave' as never, weight: 2, run: () => this.#leave() });
    const store = options.storeFaults.map((f) => ({ kind: f.kind, weight: STORE_WEIGHT, run: () => f.run(options.rng, options.rec).then(() => options.log?.(`nemesis: ${f.kind}`)) }));
    this.#kinds = [...candidate, ...store].filter((k) => !options.only || options.only.includes(k.kind));
  }

  /** The kinds this nemesis draws from. */
  get kinds(): string[] {
    return this.#kinds.map((k) => k.kind);
  }

  /** Runs faults until `signal` aborts; the fault in progress is healed first. */
  async run(signal: AbortSignal): Promise<void> {
    const { rng } = this.#o;
    const total = this.#kinds.reduce((a, k) => a + k.weight, 0);
    while (!signal.aborted && this.#kinds.length > 0) {
      await sleep(rng.int(500, 2000), signal).catch(() => undefined);
      if (signal.aborted) break;
      let r = rng.next() * total;
      const k = this.#kinds.find((x) => (r -= x.weight) < 0) ?? this.#kinds.at(-1)!;
      await k.run();
    }
  }

  /** The holder most of the time (where safety is at stake), else anyone. */
  #target(holderChance: number): number {
    const { pool, rng } = this.#o;
    const holder = pool.holder();
    return holder !== undefined && rng.chance(holderChance) ? holder : rng.int(0, pool.size - 1);
  }

  /** A member leaves the group (every shard it holds drained and handed over), stays out 0.5–3 s, and joins again. */
  async #leave(): Promise<void> {
    const { pool, rng, rec, log } = this.#o;
    const slot = this.#target(this.#o.aimAtHolder ?? 0.75);
    const who = pool.name(slot);
    const ms = rng.int(500, 3000);
    rec.fault('leave', 'start', who, `${ms} ms out`);
    try {
      await pool.leave(slot);
      await sleep(ms);
    } catch (e) {
      log?.(`nemesis: leave ${who}: ${String(e)}`);
    }
    pool.join(slot);
    rec.fault('leave', 'end', who);
    log?.(`nemesis: leave ${who} ${ms} ms, joined again`);
  }

  async #candidateFault(kind: (typeof CANDIDATE_FAULTS)[number]): Promise<void> {
    const { pool, rng, rec, ttlMs, log } = this.#o;
    const slot = this.#target(kind === 'clock-jump' ? 0.5 : (this.#o.aimAtHolder ?? 0.75));
    const who = pool.name(slot);
    const say = (detail: string): void => log?.(`nemesis: ${kind} ${who} ${detail}`);
    switch (kind) {
      case 'kill': {
        const shards = pool.shardsOf(slot);
        const t = rec.fault('kill', 'start', who).t;
        const regranted = pool.regranted(t, who, shards);
        await pool.kill(slot);
        // Give the others their chance to take over before the slot comes back (and before the
        // next fault, which could hit the successor mid-failover): in the shard kind, every shard
        // the killed member held.
        const until = performance.now() + this.#o.failoverBoundMs + 500;
        while (!(shards.length > 0 ? regranted() : pool.grantedSince(t, who)) && performance.now() < until) await sleep(50);
        rec.fault('kill', 'end', who);
        await pool.spawn(slot);
        say(`→ respawned as ${pool.name(slot)}`);
        return;
      }
      case 'pause': {
        const ms = ttlMs + rng.int(300, 2000);
        rec.fault('pause', 'start', who, `${ms} ms`);
        pool.pause(slot);
        await sleep(ms);
        pool.resume(slot);
        rec.fault('pause', 'end', who);
        say(`${ms} ms`);
        return;
      }
      case 'blackhole':
      case 'delay': {
        const ms = kind === 'blackhole' ? rng.int(300, 2 * ttlMs) : rng.int(500, 3000);
        const lag = rng.int(20, Math.max(20, ttlMs / 4));
        rec.fault(kind, 'start', who, kind === 'delay' ? `${lag} ms for ${ms} ms` : `${ms} ms`);
        for (const p of pool.proxies(slot)) {
          if (kind === 'blackhole') p.blackhole();
          else p.delay(lag);
        }
        await sleep(ms);
        for (const p of pool.proxies(slot)) p.heal();
        rec.fault(kind, 'end', who);
        say(`${ms} ms`);
        return;
      }
      case 'cut': {
        rec.fault('cut', 'start', who);
        for (const p of pool.proxies(slot)) p.cut();
        rec.fault('cut', 'end', who);
        say('');
        return;
      }
      case 'clock-jump': {
        const minutes = rng.int(1, 30) * (rng.chance(0.5) ? 1 : -1);
        const total = pool.jumpClock(slot, minutes);
        rec.fault('clock-jump', 'start', who, `${minutes > 0 ? '+' : ''}${minutes} min (now ${total} min)`);
        rec.fault('clock-jump', 'end', who);
        say(`${minutes} min`);
        return;
      }
    }
  }
}
