import type { Etcd3, IKeyValue, IWatchResponse } from 'etcd3';
import { Backoff } from '../../core/backoff.js';
import { TenureError } from '../../core/errors.js';
import { etcd3 } from './peer.js';

/**
 * tenure's own watch stream, one per client, beside etcd3's: etcd3 (like Go's clientv3) attaches
 * a client's watchers **one at a time**, each create request waiting for the server's `created`
 * reply before the next is sent. 1,000 participants queueing over 20 clients waited ~100 round
 * trips in a row per client (bench scale), and 10,000 elections on one session had their holder
 * watches at the server 12 s after the last campaign won (bench many). etcd ≥ 3.4 takes a
 * client-chosen `watch_id` in the create request for exactly this ("to ensure that ordering is
 * correct when creating multiple watchers on the same stream"), so here every create is written at
 * once, and replies and events are matched by id. Nothing else changes at the server: still one
 * watch per key a recipe waits on, so the predecessor rule and its one wake-up per release hold.
 *
 * - A watch cancelled before its `created` reply is cancelled at once (the server handles one
 *   stream's requests in order: create, then cancel); replies for it are dropped.
 * - A broken stream is reopened (5 ms, doubling to 1 s) and every watch re-created from the
 *   revision after the last event it delivered (a "now" watch: after its creation's revision), so
 *   a deletion during the gap is replayed, never lost; one never created is created anew.
 * - A watch the server ends (its resume revision compacted away, permission refused) reports
 *   `failed`: the caller re-reads what it was waiting for.
 * - The stream stays open 1 s after its last watch ends (a queue's watches end and start again
 *   on every hand-off: a new gRPC stream per cycle was half of an uncontended cycle), then closes.
 */

/** What a {@link watchKey} caller hears. */
export interface WatchListener {
  /** The server created the watch (first time only): the reply's header revision. */
  created?(revision: bigint): void;
  /** An event on the key (or range). */
  event(type: 'put' | 'delete', kv: IKeyValue): void;
  /**
   * The server ended the watch, or the client was closed (etcd3's ClientClosedError); nothing
   * more will come (re-read, then watch again — not after ClientClosedError).
   */
  failed(err: Error): void;
}

export interface WatchSpec {
  key: Buffer;
  /** Exclusive end of a range; omitted: the key alone. */
  rangeEnd?: Buffer;
  /** First revision to deliver; omitted: "now" (see waitDeleted in watch.ts). */
  startRevision?: bigint;
  /** Deliver deletions only. */
  deletesOnly?: boolean;
}

/** A live watch: `cancel()` is idempotent and never waits. */
export interface KeyWatch {
  cancel(): void;
}

/** How long the stream stays open after its last watch ends. */
const IDLE_MS = 1000;

interface Entry {
  readonly id: string;
  readonly spec: WatchSpec;
  readonly listener: WatchListener;
  /** Where a re-created watch resumes (undefined: "now", never created yet). */
  resumeAt: bigint | undefined;
  announced: boolean;
}

interface Stream {
  write(req: unknown): boolean;
  cancel(): void;
  on(ev: 'data', fn: (res: IWatchResponse) => void): Stream;
  on(ev: 'error' | 'end', fn: (err?: unknown) => void): Stream;
}

/** Per-client counters, for tests and the bench. */
export interface WatchStreamStats {
  /** Create requests written (first creations and re-creations after a reconnect). */
  creates: number;
  /** Streams opened. */
  streams: number;
}

class WatchHub {
  readonly stats: WatchStreamStats = { creates: 0, streams: 0 };
  readonly #client: Etcd3;
  readonly #entries = new Map<string, Entry>();
  readonly #backoff = new Backoff({ initialMs: 5, maxMs: 1000 });
  #stream: Stream | undefined;
  #opening = false;
  #nextId = 1n;
  #idle: NodeJS.Timeout | undefined;
  #retry: NodeJS.Timeout | undefined;
  #closed = false;

  constructor(client: Etcd3) {
    this.#client = client;
  }

  add(spec: WatchSpec, listener: WatchListener): KeyWatch {
    const entry: Entry = { id: String(this.#nextId++), spec, listener, resumeAt: spec.startRevision, announced: false };
    if (this.#closed) {
      queueMicrotask(() => listener.failed(new etcd3.ClientClosedError('watch')));
      return { cancel: () => undefined };
    }
    this.#entries.set(entry.id, entry);
    if (this.#idle) clearTimeout(this.#idle);
    this.#idle = undefined;
    if (this.#stream) this.#create(this.#stream, entry);
    else this.#open();
    return { cancel: () => this.#cancel(entry) };
  }

  /** Ends the stream; every watch on it fails with ClientClosedError (the client is closing). */
  close(): void {
    this.#closed = true;
    this.#drop();
    this.#fail(new etcd3.ClientClosedError('watch'));
  }

  /** Breaks the stream as a network fault would (tests). */
  breakStream(): void {
    this.#stream?.cancel();
  }

  #cancel(entry: Entry): void {
    if (this.#entries.get(entry.id) !== entry) return;
    this.#entries.delete(entry.id);
    // Written behind its create on the same stream, so the server has it by then; on a stream
    // opened later it was never created at all.
    this.#stream?.write({ cancel_request: { watch_id: entry.id } });
    if (this.#entries.size === 0 && !this.#idle) {
      this.#idle = setTimeout(() => {
        this.#idle = undefined;
        if (this.#entries.size === 0) this.#drop();
      }, IDLE_MS);
      this.#idle.unref();
    }
  }

  #create(stream: Stream, e: Entry): void {
    this.stats.creates++;
    stream.write({
      create_request: {
        key: e.spec.key,
        range_end: e.spec.rangeEnd,
        start_revision: e.resumeAt === undefined ? undefined : String(e.resumeAt),
        filters: e.spec.deletesOnly ? [etcd3.FilterType.Noput] : [],
        watch_id: e.id,
      },
    });
  }

  #open(): void {
    if (this.#opening || this.#stream || this.#closed) return;
    this.#opening = true;
    const watchClient = (this.#client as unknown as { watchClient: { watch(): Promise<Stream> } }).watchClient;
    watchClient.watch().then(
      (stream) => {
        this.#opening = false;
        if (this.#closed || this.#entries.size === 0) {
          stream.on('error', () => undefined);
          stream.cancel();
          return;
        }
        this.stats.streams++;
        this.#stream = stream;
        stream
          .on('data', (res) => {
            if (this.#stream === stream) this.#onResponse(res);
          })
          .on('error', () => this.#broken(stream))
          .on('end', () => this.#broken(stream));
        for (const e of this.#entries.values()) this.#create(stream, e);
      },
      (err: unknown) => {
        this.#opening = false;
        if (err instanceof etcd3.ClientClosedError) {
          this.#closed = true;
          this.#fail(err);
        } else this.#reopenLater();
      },
    );
  }

  #onResponse(res: IWatchResponse): void {
    const e = this.#entries.get(String(res.watch_id));
    if (!e) return; // cancelled by us: its last replies
    if (res.canceled) {
      // Refused at creation, or ended by the server (compacted past where it would resume).
      this.#entries.delete(e.id);
      const why = res.cancel_reason || (res.compact_revision !== '0' ? `compacted at revision ${res.compact_revision}` : 'cancelled by the server');
      e.listener.failed(new TenureError(`etcd watch on ${e.spec.key.toString()} ended: ${why}`));
      return;
    }
    if (res.created) {
      this.#backoff.reset();
      const rev = BigInt(res.header.revision);
      // A "now" watch starts right after the revision its creation read.
      e.resumeAt ??= rev + 1n;
      if (!e.announced) {
        e.announced = true;
        e.listener.created?.(rev);
      }
      return;
    }
    for (const ev of res.events) {
      e.resumeAt = BigInt(ev.kv.mod_revision) + 1n;
      // (enum names as the proto spells them: 'PUT', 'DELETE')
      e.listener.event(String(ev.type).toUpperCase() === 'DELETE' ? 'delete' : 'put', ev.kv);
      if (this.#entries.get(e.id) !== e) return; // the listener cancelled it
    }
  }

  #broken(stream: Stream): void {
    if (this.#stream !== stream) return;
    this.#stream = undefined;
    try {
      stream.cancel();
    } catch {
      // already gone
    }
    if (this.#entries.size > 0) this.#reopenLater();
  }

  #reopenLater(): void {
    if (this.#retry || this.#closed) return;
    this.#retry = setTimeout(() => {
      this.#retry = undefined;
      if (this.#entries.size > 0) this.#open();
    }, this.#backoff.next());
    this.#retry.unref();
  }

  #fail(err: Error): void {
    const all = [...this.#entries.values()];
    this.#entries.clear();
    for (const e of all) e.listener.failed(err);
  }

  #drop(): void {
    if (this.#idle) clearTimeout(this.#idle);
    if (this.#retry) clearTimeout(this.#retry);
    this.#idle = this.#retry = undefined;
    const s = this.#stream;
    this.#stream = undefined;
    if (s) {
      s.on('error', () => undefined);
      s.cancel();
    }
  }
}

const hubs = new WeakMap<Etcd3, WatchHub>();

function hubOf(client: Etcd3): WatchHub {
  let hub = hubs.get(client);
  if (!hub) hubs.set(client, (hub = new WatchHub(client)));
  return hub;
}

/** Watches a key (or range) on the client's tenure watch stream; see the module note. */
export function watchKey(client: Etcd3, spec: WatchSpec, listener: WatchListener): KeyWatch {
  return hubOf(client).add(spec, listener);
}

/** Closes the client's tenure watch stream, if any (the client is closing): its watches, and any made later, fail with ClientClosedError. */
export function closeWatchStream(client: Etcd3): void {
  hubOf(client).close();
}

/** The client's watch-stream counters (zero before its first watch). */
export function watchStreamStats(client: Etcd3): Readonly<WatchStreamStats> {
  return hubs.get(client)?.stats ?? { creates: 0, streams: 0 };
}

/** Breaks the client's watch stream as a network fault would: every watch is re-created from where it was. For tests. */
export function breakWatchStream(client: Etcd3): void {
  hubs.get(client)?.breakStream();
}
