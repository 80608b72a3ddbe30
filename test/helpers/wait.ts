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

/**
 * How `p` has settled within `ms`: 'resolved', 'rejected', or 'pending' when it has not (a bounded
 * wait for "settles promptly", never a stopwatch).
 */
export async function settlesWithin(p: Promise<unknown>, ms: number): Promise<'resolved' | 'rejected' | 'pending'> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<'pending'>((r) => (timer = setTimeout(() => r('pending'), ms)));
  try {
    return await Promise.race([p.then(() => 'resolved' as const, () => 'rejected' as const), late]);
  } finally {
    clearTimeout(timer);
  }
}

/** How `p` settled (its error, undefined when it resolved), and after how many ms. */
export async function timed(p: Promise<unknown>): Promise<{ ms: number; error: unknown }> {
  const t0 = performance.now();
  const error = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  return { ms: performance.now() - t0, error };
}
