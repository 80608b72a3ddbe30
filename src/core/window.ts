import { ClosedError } from './errors.js';

/**
 * How many joins of a queue (an etcd enqueue txn, a ZooKeeper protected create: the first step
 * of every campaign and acquire) one session or client has in flight at once; the rest wait their
 * turn, in order. 10,000 elections campaigning at once on one session sent 10,000 requests
 * together. On etcd the replies, processed in a burst, held the keepalive's turn past the lease's
 * local deadline (TTL 2 s: the session lost its lease before the campaigns were done); on
 * ZooKeeper the heartbeat and the later requests queued behind thousands at the server, past
 * `callTimeoutMs`, and the link was dropped as silent again and again. Windowed, 10,000 campaigns
 * are done in seconds with the event loop never more than ~0.2 s late (bench/RESULTS.md).
 * Releases are not windowed (their own bound counts from their call).
 */
export const JOINS_IN_FLIGHT = 32;

/** A FIFO counting semaphore per client. */
class Slots {
  #free: number;
  readonly #waiting: { go: () => void; signal: AbortSignal; onAbort: () => void }[] = [];

  constructor(n: number) {
    this.#free = n;
  }

  /** Runs `fn` once a slot is free (rejects with `signal.reason` if it aborts first). */
  run<T>(signal: AbortSignal, fn: () => Promise<T>): Promise<T> {
    if (signal.aborted) return Promise.reject(signal.reason as Error);
    if (this.#free === 0) return this.#queued(signal, fn);
    // A free slot (every uncontended acquire): no await before `fn`, one promise layer.
    this.#free--;
    let p: Promise<T>;
    try {
      p = fn();
    } catch (e) {
      this.#leave();
      return Promise.reject(e as Error);
    }
    return p.then(this.#pass, this.#fail);
  }

  /** `finally(#leave)` in one promise layer, not three. */
  readonly #pass = <T>(v: T): T => {
    this.#leave();
    return v;
  };

  readonly #fail = (e: unknown): never => {
    this.#leave();
    throw e;
  };

  readonly #leave = (): void => {
    const next = this.#waiting.shift();
    if (next) next.go();
    else this.#free++;
  };

  async #queued<T>(signal: AbortSignal, fn: () => Promise<T>): Promise<T> {
    await new Promise<void>((resolve, reject) => {
      const entry = {
        go: () => {
          signal.removeEventListener('abort', entry.onAbort);
          resolve();
        },
        signal,
        onAbort: () => {
          const i = this.#waiting.indexOf(entry);
          if (i >= 0) this.#waiting.splice(i, 1);
          reject(signal.reason ?? new ClosedError('join'));
        },
      };
      this.#waiting.push(entry);
      signal.addEventListener('abort', entry.onAbort, { once: true });
    });
    try {
      return await fn();
    } finally {
      this.#leave();
    }
  }
}

const byClient = new WeakMap<object, Slots>();

/** Runs one join of `owner`'s (a session or client) within its window (see JOINS_IN_FLIGHT); rejects with `signal.reason` if it aborts while waiting. */
export function inWindow<T>(owner: object, signal: AbortSignal | undefined, fn: () => Promise<T>): Promise<T> {
  let s = byClient.get(owner);
  if (!s) byClient.set(owner, (s = new Slots(JOINS_IN_FLIGHT)));
  return s.run(signal ?? NEVER, fn);
}

const NEVER = new AbortController().signal;
