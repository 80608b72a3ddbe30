import { createHash } from 'node:crypto';
import type { Member } from '../core/membership.js';

/**
 * Weighted rendezvous (highest-random-weight) hashing: shard `s` belongs to the member with the
 * highest score `weight / −ln(u)`, where `u ∈ (0, 1)` is a hash of (member id, s). Every member
 * computes the same owner from the same set with no coordination, a member's expected share is
 * its weight over the total, and a change of the set moves only the shards it must: a joining
 * member takes ≈ its share from the others (1/M of the shards among M equal members) and nothing
 * else moves; a leaving member's shards spread over the rest. (Schindelhauer & Schomaker,
 * "Weighted distributed hash tables", 2005; the −ln form gives exact proportions.)
 *
 * The hash, so that another implementation can route to the same owners: the member's seed is the
 * first 8 bytes of SHA-256(UTF-8 id) as two big-endian uint32 (a, b); for shard s,
 * `hi = fmix32(a ^ imul(s + 1, 0x9e3779b1))`, `lo = fmix32(b ^ hi ^ imul(s + 1, 0x85ebca77))`
 * (murmur3's finalizer, 32-bit arithmetic), `u = (hi · 2^21 + (lo >>> 11) + 0.5) / 2^53`. Ties
 * (equal scores) go to the smaller id.
 */

function fmix32(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

const seeds = new Map<string, [number, number]>();

/** The member's hash seed (memoized: ids are few and long-lived; bounded for generated ones). */
function seedOf(id: string): [number, number] {
  let s = seeds.get(id);
  if (!s) {
    const d = createHash('sha256').update(id, 'utf8').digest();
    s = [d.readUInt32BE(0), d.readUInt32BE(4)];
    if (seeds.size >= 4096) seeds.clear();
    seeds.set(id, s);
  }
  return s;
}

/** u ∈ (0, 1) for (member seed, shard). */
function unit(seed: [number, number], shard: number): number {
  const hi = fmix32(seed[0] ^ Math.imul(shard + 1, 0x9e3779b1));
  const lo = fmix32(seed[1] ^ hi ^ Math.imul(shard + 1, 0x85ebca77));
  return (hi * 2097152 + (lo >>> 11) + 0.5) / 9007199254740992;
}

/** The member's score for a shard: higher wins. */
function score(seed: [number, number], weight: number, shard: number): number {
  return weight / -Math.log(unit(seed, shard));
}

/** The owner of `shard` among `members` by weighted rendezvous hashing (undefined when there are none). */
export function shardOwner(shard: number, members: readonly Member[]): Member | undefined {
  let best: Member | undefined;
  let bestScore = -Infinity;
  for (const m of members) {
    const sc = score(seedOf(m.id), m.weight, shard);
    if (sc > bestScore || (sc === bestScore && best !== undefined && m.id < best.id)) [best, bestScore] = [m, sc];
  }
  return best;
}

/** The shards (0 … count−1) `id` owns among `members`, ascending; none when it is not a member. */
export function shardsOf(id: string, members: readonly Member[], count: number): number[] {
  const me = members.find((m) => m.id === id);
  if (!me) return [];
  const others = members.filter((m) => m !== me).map((m) => ({ id: m.id, weight: m.weight, seed: seedOf(m.id) }));
  const mine = seedOf(me.id);
  const out: number[] = [];
  for (let s = 0; s < count; s++) {
    const own = score(mine, me.weight, s);
    let wins = true;
    for (const o of others) {
      const sc = score(o.seed, o.weight, s);
      if (sc > own || (sc === own && o.id < me.id)) {
        wins = false;
        break;
      }
    }
    if (wins) out.push(s);
  }
  return out;
}
