import { StaleFenceError } from './errors.js';
import { refused } from './fence-events.js';
import { waitScope } from './abort.js';
import { WAIT_KEYS, type WaitOptions } from './options.js';
import { requireOptions, requireString } from './validate.js';
import { requireFence, type FencedResource } from './fencing.js';

/** One write the resource accepted or refused, for tests and demos. */
export interface FenceDecision {
  /** The fence the write carried. */
  fence: bigint;
  /** Whether the resource accepted it. */
  accepted: boolean;
  /** The highest fence at the moment of the decision (after it, when accepted). */
  highest: bigint;
}

/**
 * The reference {@link FencedResource}: in one process, writes are serialized so the fence check,
 * `fn` and the recording of the fence happen as one step. Useful in tests, demos and for a
 * resource that lives in the same process as the check (a file, an in-memory model).
 * It cannot roll back side effects `fn` made before throwing; only the fence stays unmoved.
 */
export class InMemoryFencedResource implements FencedResource<void> {
  readonly name: string;
  #highest = 0n;
  #tail: Promise<unknown> = Promise.resolve();
  readonly #history: FenceDecision[] = [];

  /** @param name the resource's name, used in errors. @default 'resource' */
  constructor(name = 'resource') {
    this.name = requireString('name', name);
  }

  /**
   * Writes are queued one after another: `options.signal` / `timeoutMs` bound the wait for this
   * write's turn (given up on, it rejects and `fn` never runs); once `fn` has started the write
   * runs to its end.
   */
  write<T>(fence: bigint, fn: (ctx: void) => T | Promise<T>, options?: WaitOptions): Promise<T> {
    let scope;
    try {
      requireFence(fence);
      scope = waitScope(`fenced write to ${this.name}`, requireOptions('options', options, WAIT_KEYS));
    } catch (e) {
      return Promise.reject(e);
    }
    const signal = scope.signal;
    let started = false;
    const run = async (): Promise<T> => {
      if (signal.aborted) throw signal.reason; // given up on while queued: never runs
      started = true;
      if (fence < this.#highest) {
        this.#history.push({ fence, accepted: false, highest: this.#highest });
        throw refused(new StaleFenceError(fence, this.#highest, this.name));
      }
      const result = await fn();
      if (fence > this.#highest) this.#highest = fence;
      this.#history.push({ fence, accepted: true, highest: this.#highest });
      return result;
    };
    const p = this.#tail.then(run, run);
    this.#tail = p.catch(() => undefined);
    return new Promise<T>((resolve, reject) => {
      const onAbort = (): void => void (started || reject(signal.reason));
      signal.addEventListener('abort', onAbort, { once: true });
      if (signal.aborted) onAbort();
      p.then(resolve, reject).finally(() => {
        signal.removeEventListener('abort', onAbort);
        scope.dispose();
      });
    });
  }

  /** Answers at once (`options` is validated, an aborted signal rejects). */
  highestFence(options?: WaitOptions): Promise<bigint> {
    try {
      const o = requireOptions('options', options, WAIT_KEYS);
      waitScope(`highestFence of ${this.name}`, o).dispose();
      o.signal?.throwIfAborted();
    } catch (e) {
      return Promise.reject(e);
    }
    return Promise.resolve(this.#highest);
  }

  /** Every decision so far, oldest first. */
  history(): readonly FenceDecision[] {
    return [...this.#history];
  }
}
