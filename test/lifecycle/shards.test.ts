import { describe, expect, it } from 'vitest';
import { LeaseController } from '../../src/core/lease.js';
import { ClosedError, ShardManager, shardsOf, type Candidate, type LeaderInfo, type Lease, type Member, type Membership, type WaitOptions } from '../../src/index.js';
import { pollValue } from '../helpers/wait.js';

/**
 * The ShardManager's own logic (not a store's), in process, with a hand-written Membership whose
 * live set the test sets, and candidates that win at once: how long a new set must hold before
 * shards move (`settleMs`). The stores' behaviour is the contract's (test/contract/shards.ts).
 */

/** A group whose live set the test writes; every observer sees each write. */
class Group {
  set: Member[] = [];
  readonly #wake = new Set<() => void>();
  write(set: Member[]): void {
    this.set = set;
    for (const w of [...this.#wake]) w();
  }
  async *observe(signal: AbortSignal): AsyncGenerator<readonly Member[], void, undefined> {
    for (;;) {
      yield this.set;
      await new Promise<void>((resolve, reject) => {
        const done = (): void => {
          this.#wake.delete(done);
          resolve();
        };
        this.#wake.add(done);
        signal.addEventListener('abort', () => reject(signal.reason), { once: true });
      });
    }
  }
}

class HandWrittenMembership implements Membership {
  readonly group = 'g';
  readonly weight = 1;
  joined = false;
  constructor(
    readonly id: string,
    private readonly g: Group,
  ) {}
  async join(): Promise<void> {
    this.joined = true;
  }
  async members(): Promise<Member[]> {
    return this.g.set;
  }
  observe(options?: { signal?: AbortSignal }): AsyncGenerator<readonly Member[], void, undefined> {
    return this.g.observe(options?.signal ?? new AbortController().signal);
  }
  async leave(): Promise<void> {
    this.joined = false;
  }
  [Symbol.asyncDispose](): Promise<void> {
    return this.leave();
  }
}

let fence = 0n;
/** Wins at once; its term lasts until resigned. */
class Winner implements Candidate {
  readonly id = 'w';
  term: Lease | undefined;
  constructor(readonly name: string) {}
  async campaign(_o?: WaitOptions): Promise<Lease> {
    return (this.term = new LeaseController({ name: this.name, fence: ++fence, release: async () => undefined }).lease);
  }
  async resign(): Promise<void> {
    await this.term?.release();
    this.term = undefined;
  }
  async leader(): Promise<LeaderInfo | undefined> {
    return undefined;
  }
  // eslint-disable-next-line require-yield -- never used: the shard managers do not observe leaders
  async *observe(): AsyncGenerator<LeaderInfo | undefined, void, undefined> {
    throw new ClosedError('not observed');
  }
  async close(): Promise<void> {
    await this.resign();
  }
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }
}

const SHARDS = 32;
const m = (id: string): Member => ({ id, weight: 1 });

describe('ShardManager settleMs', () => {
  it('a member that drops out and is back within settleMs moves no shard; one that stays out has its shards moved once settleMs has passed', async () => {
    const g = new Group();
    g.write([m('a'), m('b')]);
    const a = new ShardManager(new HandWrittenMembership('a', g), (s) => new Winner(`s${s}`), { shards: SHARDS, settleMs: 200 });
    const moves: number[] = [];
    a.on('assigned', (_all, change) => moves.push(change.added.length));
    a.start();
    await a.whenSettled({ timeoutMs: 5000 });
    const mine = shardsOf('a', [m('a'), m('b')], SHARDS);
    expect(a.held()).toEqual(mine);
    moves.length = 0;
    // b blinks: out, then back 50 ms later.
    g.write([m('a')]);
    await new Promise((r) => setTimeout(r, 50));
    g.write([m('a'), m('b')]);
    await new Promise((r) => setTimeout(r, 400));
    expect(moves).toEqual([]);
    expect(a.held()).toEqual(mine);
    // b goes for good: after settleMs its shards are a's.
    const t0 = performance.now();
    g.write([m('a')]);
    await pollValue(async () => (a.held().length === SHARDS ? true : undefined), 5000, 5);
    expect(performance.now() - t0).toBeGreaterThanOrEqual(190);
    expect(moves).toEqual([SHARDS - mine.length]);
    await a.close();
  });

  it('members joining together within settleMs move the shards once', async () => {
    const g = new Group();
    g.write([m('a')]);
    const a = new ShardManager(new HandWrittenMembership('a', g), (s) => new Winner(`s${s}`), { shards: SHARDS, settleMs: 200 });
    const changes: number[] = [];
    a.on('assigned', (_all, change) => changes.push(change.removed.length));
    a.start();
    await a.whenSettled({ timeoutMs: 5000 });
    changes.length = 0;
    for (const set of [[m('a'), m('b')], [m('a'), m('b'), m('c')], [m('a'), m('b'), m('c'), m('d')]]) {
      g.write(set);
      await new Promise((r) => setTimeout(r, 30));
    }
    await pollValue(async () => (changes.length > 0 && a.settled ? true : undefined), 5000, 5);
    expect(changes).toEqual([SHARDS - shardsOf('a', [m('a'), m('b'), m('c'), m('d')], SHARDS).length]);
    // With settleMs 0 each set is applied as it comes.
    const b = new ShardManager(new HandWrittenMembership('b', g), (s) => new Winner(`t${s}`), { shards: SHARDS, settleMs: 0 });
    const bChanges: number[] = [];
    b.on('assigned', () => bChanges.push(1));
    b.start();
    await b.whenSettled({ timeoutMs: 5000 });
    g.write([m('a'), m('b')]);
    await pollValue(async () => (bChanges.length === 2 ? true : undefined), 5000, 5);
    g.write([m('b'), m('e')]);
    await pollValue(async () => (bChanges.length === 3 ? true : undefined), 5000, 5);
    await Promise.all([a.close(), b.close()]);
  });
});
