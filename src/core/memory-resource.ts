import { StaleFenceError } from './errors.js';
import { refused } from './fence-events.js';
import { requireString } from './validate.js';
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

  write<T>(fence: bigint, fn: (ctx: void) => T | Promise<T>): Promise<T> {
    try {
      requireFence(fence);
    } catch (e) {
      return Promise.reject(e);
    }
    const run = async (): Promise<T> => {
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
    return p;
  }

  highestFence(): Promise<bigint> {
    return Promise.resolve(this.#highest);
  }

  /** Every decision so far, oldest first. */
  history(): readonly FenceDecision[] {
    return [...this.#history];
  }
}
