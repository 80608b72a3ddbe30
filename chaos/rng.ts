/**
 * A small seeded PRNG (mulberry32): the nemesis and every candidate draw from one, so a run's
 * choices (which fault, whom, how long; how long each write's work takes) follow from its seed.
 * The processes' interleaving does not: the servers and the scheduler are real.
 */
export class Rng {
  #s: number;

  constructor(seed: number) {
    this.#s = seed >>> 0;
  }

  /** A float in [0, 1). */
  next(): number {
    this.#s = (this.#s + 0x6d2b79f5) >>> 0;
    let t = this.#s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }

  /** An integer in [min, max]. */
  int(min: number, max: number): number {
    return min + Math.floor(this.next() * (max - min + 1));
  }

  /** True with probability `p`. */
  chance(p: number): boolean {
    return this.next() < p;
  }

  pick<T>(items: readonly T[]): T {
    return items[Math.floor(this.next() * items.length)]!;
  }

  /** A seed for a derived stream (a candidate's), stable for the same parent seed and label. */
  static derive(seed: number, label: string): number {
    let h = seed >>> 0;
    for (let i = 0; i < label.length; i++) h = Math.imul(h ^ label.charCodeAt(i), 0x01000193) >>> 0;
    return h;
  }
}
