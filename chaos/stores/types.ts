import { FaultProxy, type HistoryRecorder } from '../../src/testing/index.js';
import type { Rng } from '../rng.js';
import type { StoreEndpoints } from '../worker/kind.js';

export type Backend = StoreEndpoints['backend'];
export const BACKENDS: readonly Backend[] = ['etcd', 'zk', 'redis', 'postgres'];

/** A fault done to the store's own processes; records its start and end itself. */
export interface StoreFault {
  readonly kind: string;
  run(rng: Rng, rec: HistoryRecorder): Promise<void>;
}

/**
 * The server side of one backend in a chaos run: the real servers, one set of fault proxies
 * per candidate slot (so one candidate's link can be cut alone), the faults the store offers,
 * and the leak check.
 */
export interface ChaosStore {
  readonly backend: Backend;
  /** The election's name on this backend. */
  readonly name: string;
  readonly faults: readonly StoreFault[];
  start(slots: number): Promise<void>;
  /** How candidate `slot` reaches the store: through its own proxies. */
  endpoints(slot: number): StoreEndpoints;
  proxies(slot: number): readonly FaultProxy[];
  /** Brings every member back (the end of a run). */
  heal(): Promise<void>;
  /** What the store still holds for the election: keys, leases, znodes, advisory locks. */
  leftovers(): Promise<string[]>;
  stop(): Promise<void>;
}

/** One proxy per (slot, server port): the links of each candidate, faultable one candidate at a time. */
export class ProxySet {
  readonly #bySlot: FaultProxy[][] = [];

  async start(slots: number, ports: readonly number[]): Promise<void> {
    for (let s = 0; s < slots; s++) {
      this.#bySlot.push(await Promise.all(ports.map((port) => new FaultProxy({ target: { port } }).start())));
    }
  }

  of(slot: number): readonly FaultProxy[] {
    const p = this.#bySlot[slot];
    if (!p) throw new Error(`no proxies for slot ${slot}`);
    return p;
  }

  healAll(): void {
    for (const ps of this.#bySlot) for (const p of ps) p.heal();
  }

  async stop(): Promise<void> {
    await Promise.all(this.#bySlot.flat().map((p) => p.stop()));
  }
}

/** Kills one member, leaves it down a while, starts it again (same ports and data). */
export function memberKill(members: () => readonly { name: string; kill(): Promise<void>; start(): Promise<unknown> }[]): StoreFault {
  return {
    kind: 'member-kill',
    async run(rng, rec) {
      const m = rng.pick(members());
      rec.fault('member-kill', 'start', undefined, m.name);
      await m.kill();
      await new Promise((r) => setTimeout(r, rng.int(500, 3000)));
      await m.start();
      rec.fault('member-kill', 'end', undefined, m.name);
    },
  };
}

/** A whole-store crash and restart (every member SIGKILLed, then all started again). */
export function storeRestart(kind: string, restart: (hard: boolean) => Promise<void>, hardOnly = true): StoreFault {
  return {
    kind,
    async run(rng, rec) {
      const hard = hardOnly || rng.chance(0.5);
      rec.fault(kind, 'start', undefined, hard ? 'SIGKILL' : 'clean');
      await restart(hard);
      rec.fault(kind, 'end');
    },
  };
}
