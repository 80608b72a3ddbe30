import type { Client, Stat } from 'node-zookeeper-client';
import { raceSignal, sleep } from '../../core/abort.js';
import { Backoff } from '../../core/backoff.js';
import { BusyError } from '../../core/errors.js';
import { memberValue, parseMember, type Member } from '../../core/membership.js';
import { optionalWeight, StoreMembership, type MembershipDriver } from '../../core/store-membership.js';
import { optionalId, requireOptions } from '../../core/validate.js';
import { mapZkError, validateAcl, type ClientAcl } from './acl.js';
import { requireSession } from './guard.js';
import { awaitCleanup, deleteEventually, retrying, statOf } from './nodes.js';
import { dropWatcher, isNoNode, isNodeExists, zkExists, zkGetChildren, zkGetData, zkMkdirp } from './ops.js';
import { zookeeper } from './peer.js';
import { joinPath, validatePath } from './paths.js';
import type { ZkConn, ZkSession } from './session.js';

/** Options of a {@link ZkMembership}. */
export interface ZkMembershipOptions {
  /** This member's id, unique in the group. @default a random UUID */
  id?: string;
  /** Its share of the work relative to the other members (> 0). @default 1 */
  weight?: number;
  /** The ACL of the nodes it creates. @default the session's `acl` */
  acl?: ClientAcl[];
}

/** A node name for an id: URI-encoded, dots too (`.` and `..` are not node names). */
const nodeOf = (id: string): string => encodeURIComponent(id).replace(/\./g, '%2E');

/** Creates an ephemeral (not sequential) node. */
function zkCreateEphemeral(client: Client, path: string, data: Buffer, acl: ClientAcl[] | undefined): Promise<void> {
  const acls = acl ?? (zookeeper.ACL as unknown as { OPEN_ACL_UNSAFE: ClientAcl[] }).OPEN_ACL_UNSAFE;
  return new Promise((resolve, reject) => client.create(path, data, acls, zookeeper.CreateMode.EPHEMERAL, (e) => (e ? reject(e) : resolve())));
}

const ownerOf = (stat: Stat): string => (stat.ephemeralOwner as unknown as Buffer).toString('hex');

/**
 * Group membership on ZooKeeper: each member is one ephemeral node, `<path>/<id>` (the id
 * URI-encoded), holding `{"id","weight"}`, so it lives exactly as long as the member's ZooKeeper
 * session — the liveness of every latch and lock on that session: a member whose process dies or
 * freezes drops out when its session expires (the session timeout); one that closes its session
 * drops out at once; a disconnection alone (SUSPENDED) does not end it. After the session is lost
 * the member joins again on the session's next one. Observers list the children with a watch on
 * the group node (one watch per observer).
 */
export class ZkMembership extends StoreMembership {
  constructor(session: ZkSession, path: string, options?: ZkMembershipOptions) {
    const s = requireSession(session);
    const base = validatePath('path', path);
    const o = requireOptions('options', options, { id: true, weight: true, acl: true });
    const id = optionalId(o.id);
    const weight = optionalWeight(o.weight);
    super(base, id, weight, new ZkMembers(s, base, { id, weight }, validateAcl(o.acl) ?? s.acl));
  }
}

/** The driver: one ephemeral node, owner-checked by its session. */
class ZkMembers implements MembershipDriver {
  readonly what: string;
  readonly #session: ZkSession;
  readonly #base: string;
  readonly #path: string;
  readonly #data: Buffer;
  readonly #acl: ClientAcl[] | undefined;
  #mine: { conn: ZkConn; stop: () => void } | undefined;

  constructor(session: ZkSession, base: string, me: Member, acl: ClientAcl[] | undefined) {
    this.what = `zk membership '${base}'`;
    this.#session = session;
    this.#base = base;
    this.#path = joinPath(base, nodeOf(me.id));
    this.#data = Buffer.from(memberValue(me));
    this.#acl = acl;
  }

  get logger() {
    return this.#session.logger;
  }

  async enter(signal: AbortSignal): Promise<AbortSignal> {
    this.#mine?.stop();
    await this.#session.whenConnected({ signal });
    const conn = this.#session.conn();
    const path = this.#path;
    try {
      await this.#create(conn, signal);
    } catch (e) {
      // Given up with the create maybe applied: an ephemeral node left on a live session would
      // keep this member listed as long as the session lives.
      if (!(e instanceof BusyError)) this.#sweep(conn);
      throw e;
    }
    // The node may be deleted from outside while the session lives: that ends the entry too.
    const gone = new AbortController();
    const watcher = (event: unknown): void => {
      if ((event as { getType?: () => number }).getType?.() === zookeeper.Event.NODE_DELETED) gone.abort(new BusyError(`${this.what}: this member's node was deleted`));
    };
    const stop = (): void => dropWatcher(conn.client, path, watcher);
    this.#mine = { conn, stop };
    const stat = await retrying(this.#session, conn, signal, () => zkExists(conn.client, path, watcher)).catch(() => undefined);
    if (stat === null) gone.abort(new BusyError(`${this.what}: this member's node was deleted`));
    return AbortSignal.any([conn.signal, gone.signal]);
  }

  /** Creates this member's node on `conn` (ours already after a connection loss is fine); BusyError when another session's. */
  async #create(conn: ZkConn, signal: AbortSignal): Promise<void> {
    const path = this.#path;
    for (;;) {
      try {
        await retrying(this.#session, conn, signal, () => zkCreateEphemeral(conn.client, path, this.#data, this.#acl));
      } catch (e) {
        if (isNoNode(e)) {
          await retrying(this.#session, conn, signal, () => zkMkdirp(conn.client, this.#base, this.#acl));
          continue;
        }
        if (!isNodeExists(e)) throw mapZkError(e, this.#base);
        const stat = await statOf(this.#session, conn, path, signal);
        if (stat === null) continue; // it went in between: create again
        // Ours already: a create that landed before a connection loss, retried.
        if (ownerOf(stat) !== conn.sessionId) throw new BusyError(`${this.what}: '${path}' is already a live member (session 0x${ownerOf(stat)}); ids are unique in a group`);
      }
      return;
    }
  }

  /** Deletes this member's node if `conn`'s session owns it; resolves when done or given up (never rejects). */
  #remove(conn: ZkConn): Promise<void> {
    if (conn.signal.aborted) return Promise.resolve(); // the node went with its session
    return (async () => {
      await this.#session.whenConnected({ signal: conn.signal });
      const stat = await statOf(this.#session, conn, this.#path, conn.signal);
      if (stat && ownerOf(stat) === conn.sessionId) await deleteEventually(this.#session, conn, this.#path);
    })().catch((e: unknown) => this.#session.logger.debug({ err: e }, `${this.what}: could not remove this member's node (it goes with its session)`));
  }

  /** In the background: the node of an abandoned join, if it landed. */
  #sweep(conn: ZkConn): void {
    void this.#remove(conn);
  }

  async exit(): Promise<void> {
    const mine = this.#mine;
    this.#mine = undefined;
    if (!mine) return;
    mine.stop();
    await awaitCleanup(this.#session, this.#remove(mine.conn), 2000);
  }

  read(signal: AbortSignal): Promise<Member[]> {
    return this.#list(this.#session.conn(), signal, undefined).then((r) => r ?? []);
  }

  /** The members under the group node (undefined when it does not exist), with `watcher` on its children when given. */
  async #list(conn: ZkConn, signal: AbortSignal, watcher: ((e: unknown) => void) | undefined): Promise<Member[] | undefined> {
    const children = await retrying(this.#session, conn, signal, () => zkGetChildren(conn.client, this.#base, watcher), watcher === undefined).catch((e: unknown) => {
      if (isNoNode(e)) return undefined;
      throw mapZkError(e, this.#base);
    });
    if (children === undefined) return undefined;
    const nodes = await Promise.all(children.map((c) => retrying(this.#session, conn, signal, () => zkGetData(conn.client, joinPath(this.#base, c)), watcher === undefined)));
    const out: Member[] = [];
    for (const n of nodes) {
      const m = n && parseMember(n.data.toString('utf8'));
      if (m) out.push(m);
    }
    return out;
  }

  async *watch(signal: AbortSignal): AsyncGenerator<Member[], void, undefined> {
    const backoff = new Backoff({ initialMs: 50, maxMs: 1000 });
    for (;;) {
      signal.throwIfAborted();
      let fired!: () => void;
      const changed = new Promise<void>((r) => (fired = r));
      const watcher = (): void => fired();
      let conn: ZkConn | undefined;
      let members: Member[] | undefined;
      try {
        await this.#session.whenConnected({ signal });
        const c = (conn = this.#session.conn());
        members = await this.#list(c, signal, watcher);
        // No group node yet: watch for its creation.
        if (members === undefined && (await retrying(this.#session, c, signal, () => zkExists(c.client, this.#base, watcher))) !== null) continue;
        backoff.reset();
      } catch (e) {
        if (conn) dropWatcher(conn.client, this.#base, watcher);
        if (signal.aborted) throw signal.reason;
        if (this.#session.closed) throw e;
        this.#session.logger.debug({ err: e }, `${this.what}: observe: read failed; retrying`);
        await sleep(backoff.next(), signal);
        continue;
      }
      try {
        yield members ?? [];
        await raceSignal(changed, signal, conn.signal).catch((e: unknown) => {
          if (signal.aborted) throw e; // the session ended: read again on the next
        });
      } finally {
        dropWatcher(conn.client, this.#base, watcher);
      }
    }
  }
}
