/**
 * A memo of values derived from a key (a lock name's hash, a schema's table names) that forgets
 * everything once it holds `max` entries: a program uses a few keys, and generated ones must not
 * grow it without bound.
 */
export class BoundedMemo<K, V> {
  readonly #map = new Map<K, V>();

  constructor(readonly max = 1024) {}

  get(key: K): V | undefined {
    return this.#map.get(key);
  }

  /** Stores `value` (first forgetting every entry when full) and returns it. */
  set(key: K, value: V): V {
    if (this.#map.size >= this.max) this.#map.clear();
    this.#map.set(key, value);
    return value;
  }
}
