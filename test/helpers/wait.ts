/**
 * Polls `fn` until it returns a value other than undefined (a rejection counts as "not yet"),
 * for at most `timeoutMs`. Tests bound their waits with it instead of sleeping.
 */
export async function pollValue<V>(fn: () => Promise<V | undefined>, timeoutMs = 15_000, everyMs = 20): Promise<V> {
  const end = performance.now() + timeoutMs;
  for (;;) {
    const v = await fn().catch(() => undefined);
    if (v !== undefined) return v;
    if (performance.now() > end) throw new Error(`condition not met within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

/** Retries `fn` until it resolves, for at most `timeoutMs`; rethrows its last error. */
export async function eventually<T>(fn: () => Promise<T>, timeoutMs = 10_000, intervalMs = 50): Promise<T> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    try {
      return await fn();
    } catch (e) {
      if (performance.now() > deadline) throw e;
      await new Promise((r) => setTimeout(r, intervalMs));
    }
  }
}
