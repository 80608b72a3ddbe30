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
