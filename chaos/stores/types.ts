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

/**
 * The part every store shares: its servers (one handle, a server or a cluster) and one proxy per
 * (slot, server port), so each candidate's links can be faulted alone. A store says what its
 * servers are, how a candidate is told about its proxies, and how to probe for leftovers.
 */
export abstract class ProxiedStore implements ChaosStore {
  abstract readonly backend: Backend;
  abstract readonly name: string;
  abstract readonly faults: readonly StoreFault[];
  readonly #proxies = new ProxySet();

  /** @param servers the store's server or cluster handle */
  constructor(protected readonly servers: { start(): Promise<unknown>; stop(): Promise<void> }) {}

  /** The ports the proxies forward to, once started. */
  protected abstract ports(): number[];
  /** How a candidate reaches the store through `proxies`. */
  protected abstract via(proxies: readonly FaultProxy[]): StoreEndpoints;
  abstract leftovers(): Promise<string[]>;

  async start(slots: number): Promise<void> {
    await this.servers.start();
    await this.#proxies.start(slots, this.ports());
  }

  endpoints(slot: number): StoreEndpoints {
    return this.via(this.#proxies.of(slot));
  }

  proxies(slot: number): readonly FaultProxy[] {
    return this.#proxies.of(slot);
  }

  async heal(): Promise<void> {
    this.#proxies.healAll();
    await this.servers.start();
  }

  async stop(): Promise<void> {
    await this.#proxies.stop();
    await this.servers.stop();
  }
}

/** One proxy per (slot, server port): the links of each candidate, faultable one candidate at a time. */
class ProxySet {
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
