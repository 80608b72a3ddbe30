import { raceSignal } from '../../core/abort.js';
import { retryUntil } from '../../core/backoff.js';
import { BusyError } from '../../core/errors.js';
import { memberValue, parseMember, type Member } from '../../core/membership.js';
import { optionalWeight, StoreMembership, type MembershipDriver } from '../../core/store-membership.js';
import { optionalId, requireOptions } from '../../core/validate.js';
import { callWithin } from './client.js';
import type { LeaseEpoch } from './epoch.js';
import { retryableEtcdError, toTenureError } from './errors.js';
import { prefixEnd, retryingTxn } from './kv.js';
import { requireName, requireSession } from './names.js';
import { nextChange } from './observe.js';
import { etcd3 } from './peer.js';
import type { EtcdSession } from './session.js';
import { watchOwn, type OwnWatch } from './watch.js';


/** Options of an {@link EtcdMembership}. */
export interface EtcdMembershipOptions {
  /** This member's id, unique in the group. @default a random UUID */
  id?: string;
  /** Its share of the work relative to the other members (> 0). @default 1 */
  weight?: number;
}

/**
 * Group membership on etcd: each member is one key, `<group>/<id>` (the id URI-encoded), holding
 * `{"id","weight"}` and attached to the member's session lease, so it lives exactly as long as
 * that lease — the same liveness as the session's elections and locks: a member whose process
 * dies or freezes drops out when its lease expires (the session's TTL), one that closes its
 * session drops out at once. After the lease is lost the member joins again on the session's next
 * one. Observers read the keys under `<group>/` and watch that prefix from the revision they read.
 * Keep the group's prefix for members only (an election under it would be listed and skipped).
 */
export class EtcdMembership extends StoreMembership {
  /** The session whose lease the member's key lives on. */
  readonly session: EtcdSession;

  constructor(session: EtcdSession, group: string, options?: EtcdMembershipOptions) {
    const s = requireSession(session);
    const name = requireName('group', group);
    const o = requireOptions('options', options, { id: true, weight: true });
    const id = optionalId(o.id);
    const weight = optionalWeight(o.weight);
    super(name, id, weight, new EtcdMembers(s, name, { id, weight }));
    this.session = s;
  }
}

/** The driver: one key on the session's lease, owner-checked by its create_revision. */
class EtcdMembers implements MembershipDriver {
  readonly what: string;
  readonly #session: EtcdSession;
  readonly #prefix: Buffer;
  readonly #key: Buffer;
  readonly #value: Buffer;
  /** This member's key as last put: its lease epoch and create_revision. */
  #mine: { epoch: LeaseEpoch; rev: bigint; watch: OwnWatch } | undefined;

  constructor(session: EtcdSession, group: string, me: Member) {
    this.what = `etcd membership '${group}'`;
    this.#session = session;
    this.#prefix = Buffer.from(`${group}/`);
    this.#key = Buffer.from(`${group}/${encodeURIComponent(me.id)}`);
    this.#value = Buffer.from(memberValue(me));
  }

  get logger() {
    return this.#session.logger;
  }

  async enter(signal: AbortSignal): Promise<AbortSignal> {
    this.#mine?.watch.stop(); // the entry of a lost lease
    const epoch = await this.#session.live(signal, this.what);
    const scope = AbortSignal.any([signal, epoch.signal]);
    const put = retryingTxn(
      this.#session,
      {
        compare: [{ key: this.#key, target: etcd3.CompareTarget.Create, result: etcd3.CompareResult.Equal, create_revision: '0' }],
        success: [{ request_put: { key: this.#key, value: this.#value, lease: epoch.leaseId } }],
        failure: [{ request_range: { key: this.#key } }],
      },
      scope,
      this.what,
    );
    const res = await raceSignal(put, scope).catch((e: unknown) => {
      // Given up with the put maybe applied: a key left on a live lease would keep this member
      // listed as long as the session lives. Once the put has settled, delete the key if it is
      // on this lease.
      const sweep = (): void => this.#sweep(epoch);
      put.then(sweep, sweep);
      throw e;
    });
    let rev: bigint;
    if (res.succeeded) rev = BigInt(res.header.revision);
    else {
      const kv = res.responses[0]?.response_range.kvs[0];
      // Ours already: a put whose reply was lost, retried. Anyone else's: the id is taken.
      if (!kv || kv.lease !== epoch.leaseId) throw new BusyError(`${this.what}: '${this.#key.toString().slice(this.#prefix.length)}' is already a live member (on lease ${kv?.lease ?? '?'}); ids are unique in a group`);
      rev = BigInt(kv.create_revision);
    }
    // The key may be deleted from outside while the lease lives: that ends the entry too.
    const watch = watchOwn(this.#session.client, (req, s) => retryingTxn(this.#session, req, s, this.what), this.#key, rev, epoch.signal, this.what, this.#session.logger);
    this.#mine = { epoch, rev, watch };
    return AbortSignal.any([epoch.signal, watch.gone]);
  }

  /** In the background: deletes this member's key if it is on `epoch`'s lease (bounded; a lost lease takes it anyway). */
  #sweep(epoch: LeaseEpoch): void {
    if (epoch.lost) return;
    retryingTxn(this.#session, { compare: [{ key: this.#key, target: etcd3.CompareTarget.Lease, result: etcd3.CompareResult.Equal, lease: epoch.leaseId }], success: [{ request_delete_range: { key: this.#key } }], failure: [] }, AbortSignal.timeout(2000), this.what)
      .catch((e: unknown) => this.#session.logger.debug({ err: e }, `${this.what}: could not sweep an abandoned join (the key goes with the lease)`));
  }

  async exit(): Promise<void> {
    const mine = this.#mine;
    this.#mine = undefined;
    if (!mine) return;
    mine.watch.stop();
    if (mine.epoch.lost) return; // the key goes with the lease
    await retryingTxn(
      this.#session,
      { compare: [{ key: this.#key, target: etcd3.CompareTarget.Create, result: etcd3.CompareResult.Equal, create_revision: String(mine.rev) }], success: [{ request_delete_range: { key: this.#key } }], failure: [] },
      AbortSignal.timeout(2000),
      this.what,
    );
  }

  async read(): Promise<Member[]> {
    return (await this.#range()).members;
  }

  async #range(): Promise<{ members: Member[]; revision: bigint }> {
    try {
      const r = await this.#session.client.kv.range({ key: this.#prefix, range_end: prefixEnd(this.#prefix) }, callWithin(this.#session.callTimeoutMs));
      const members: Member[] = [];
      for (const kv of r.kvs) {
        const m = parseMember(kv.value.toString('utf8'));
        if (m) members.push(m);
      }
      return { members, revision: BigInt(r.header.revision) };
    } catch (e) {
      throw toTenureError(e, `${this.what}: members`, this.#session.endpoint);
    }
  }

  async *watch(signal: AbortSignal): AsyncGenerator<Member[], void, undefined> {
    const onRetry = (e: unknown): void => this.#session.logger.debug({ err: e }, `${this.what}: observe: read failed; retrying`);
    for (;;) {
      const read = await retryUntil(() => this.#range(), { signal, retryable: retryableEtcdError, onRetry, initialMs: 50, maxMs: 1000 });
      yield read.members;
      await nextChange(this.#session.client, this.#prefix, read.revision + 1n, true, signal);
    }
  }
}
