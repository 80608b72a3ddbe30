import { ClosedError, ServerStartError } from '../core/errors.js';
import { sleep } from '../core/abort.js';
import { monotonicClock } from '../core/clock.js';
import { requireOptions } from '../core/validate.js';
import { removeDir } from './registry.js';
import { PORT_CLASH, type FaultTarget, type LocalServer, type RestartOptions } from './server.js';

/** Base of the 3-member cluster handles. */
export abstract class LocalCluster<M extends LocalServer> implements FaultTarget, AsyncDisposable {
  /** The members, in order. */
  abstract readonly members: readonly M[];
  #stopped = false;
  #wired = false;

  /** @param root the dir holding every member's dir, removed by `stop()`. */
  constructor(protected readonly root: string) {}

  /** Chooses ports for every member at once and tells each member its peers. */
  protected abstract wire(): Promise<void>;

  /**
   * Starts every member in parallel and resolves once all answer. The first start retries on
   * fresh ports, with wiped data (a half-bootstrapped member keeps the old cluster identity),
   * when a port was taken meanwhile.
   */
  async start(): Promise<this> {
    if (this.#stopped) throw new ClosedError('cluster');
    if (this.members.every((m) => m.running)) return this;
    if (this.#wired) {
      await this.startMembers();
      return this;
    }
    for (let attempt = 0; ; attempt++) {
      await this.wire();
      try {
        await this.startMembers();
        this.#wired = true;
        return this;
      } catch (e) {
        if (attempt >= 2 || !PORT_CLASH.test(String((e as Error).message))) throw e;
        await Promise.all(this.members.map((m) => m.wipeData()));
      }
    }
  }

  protected async startMembers(): Promise<void> {
    const results = await Promise.allSettled(this.members.map((m) => m.start()));
    const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed) {
      await Promise.all(this.members.map((m) => m.kill()));
      throw failed.reason;
    }
  }

  /** The member that currently leads, or undefined when none does (e.g. during an election). */
  abstract leader(): Promise<M | undefined>;

  /** Waits until some member leads (after a leader was killed, say). */
  async waitForLeader(timeoutMs = 15_000): Promise<M> {
    const deadline = monotonicClock.now() + timeoutMs;
    for (;;) {
      const l = await this.leader().catch(() => undefined);
      if (l) return l;
      if (monotonicClock.now() > deadline) throw new ServerStartError(`no leader within ${timeoutMs} ms`, '');
      await sleep(50);
    }
  }

  async kill(): Promise<void> {
    await Promise.all(this.members.map((m) => m.kill()));
  }

  async pause(): Promise<void> {
    await Promise.all(this.members.map((m) => m.pause()));
  }

  async resume(): Promise<void> {
    await Promise.all(this.members.map((m) => m.resume()));
  }

  /** Restarts the whole cluster: every member down, then every member up. */
  async restart(options: RestartOptions = {}): Promise<void> {
    requireOptions('options', options, { hard: true });
    await Promise.all(this.members.map((m) => (options.hard ? m.kill() : m.shutdown())));
    await this.startMembers();
  }

  /** Stops every member for good and removes their data. Idempotent. */
  async stop(): Promise<void> {
    if (this.#stopped) return;
    this.#stopped = true;
    await Promise.all(this.members.map((m) => m.stop()));
    await this.removeDirs();
  }

  protected async removeDirs(): Promise<void> {
    removeDir(this.root);
  }

  /** Same as `stop()`, for `await using`. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.stop();
  }
}
