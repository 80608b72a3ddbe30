import zookeeper from 'node-zookeeper-client';
import { pino } from 'pino';
import { ZkSession, type ZkSessionOptions } from '../../src/recipes/zk/index.js';

/** Timing constants for the ZooKeeper suite, in one place. */
export const T = {
  /** Session timeout for most tests (ms). */
  session: 3000,
  /** Generous bound for any event-driven wait on a loaded 2-core machine. */
  wait: 20_000,
  /** How far past its own bound (timeoutMs, callTimeoutMs) a wait may settle on a loaded machine. */
  settleSlack: 750,
};

export async function openSession(connectionString: string, options: Omit<ZkSessionOptions, 'connectionString'> = {}): Promise<ZkSession> {
  const logger = process.env.ZK_DEBUG ? pino({ level: 'debug' }, pino.destination(2)) : undefined;
  return ZkSession.create({ connectionString, ttlMs: T.session, logger, ...options });
}

/** Polls `check` every 20 ms until it returns a truthy value or `timeoutMs` passes. */
export async function eventually<V>(check: () => V | Promise<V>, timeoutMs = T.wait, what = 'condition'): Promise<NonNullable<V>> {
  const end = performance.now() + timeoutMs;
  for (;;) {
    const v = await check();
    if (v) return v as NonNullable<V>;
    if (performance.now() > end) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/**
 * Expires `session`'s ZooKeeper session from outside (Curator's KillSession): a second client
 * joins the same session id + password and closes it. The original client often wins the session
 * back before the close lands (it reconnects within a millisecond of losing it to the second
 * client): then the close expires nothing, and this tries again, until the session reports LOST.
 */
export async function expireSession(connectionString: string, session: ZkSession): Promise<void> {
  let lost = false;
  let wonBackAt: number | undefined;
  const onState = (st: string): void => {
    if (st === 'LOST') lost = true;
    if (st === 'RECONNECTED') wonBackAt = performance.now();
  };
  session.on('state', onState);
  try {
    for (let attempt = 0; attempt < 10 && !lost; attempt++) {
      wonBackAt = undefined;
      const c = session.client;
      const killer = zookeeper.createClient(connectionString, { sessionId: c.getSessionId(), sessionPassword: c.getSessionPassword(), sessionTimeout: session.ttlMs, retries: 0 } as never);
      // 'expired': an earlier attempt's close landed after all, and LOST is on its way.
      const joined = await new Promise<boolean>((resolve) => {
        killer.once('connected', () => resolve(true));
        killer.once('expired', () => resolve(false));
        killer.connect();
      });
      if (joined) {
        await new Promise<void>((resolve) => {
          killer.once('disconnected', () => resolve());
          killer.close();
        });
      } else {
        killer.close();
      }
      // A close that landed is heard at once; a session won back is reconnected and stays so.
      const until = performance.now() + session.ttlMs;
      while (!lost && performance.now() < until && !(wonBackAt !== undefined && performance.now() - wonBackAt > 500)) {
        await new Promise((r) => setTimeout(r, 20));
      }
    }
  } finally {
    session.off('state', onState);
  }
  if (!lost) throw new Error('could not expire the session');
}

/** A plain client for inspecting the tree from outside the recipes. */
export async function rawClient(connectionString: string): Promise<zookeeper.Client> {
  const c = zookeeper.createClient(connectionString, { sessionTimeout: 10_000, retries: 0 });
  await new Promise<void>((resolve) => {
    c.once('connected', () => resolve());
    c.connect();
  });
  return c;
}

export function children(c: zookeeper.Client, path: string): Promise<string[]> {
  return new Promise((resolve, reject) =>
    c.getChildren(path, (e, ch) => (e ? ((e as unknown as { getCode(): number }).getCode() === -101 ? resolve([]) : reject(e)) : resolve(ch))),
  );
}

/**
 * Parses `wchp` output: path → the sessions watching it (as 16-digit hex, like ZkSession.sessionId).
 * The server keeps one watch per session and path: two watchers on one node from one session are one.
 */
export function parseWchp(text: string): Map<string, string[]> {
  const out = new Map<string, string[]>();
  let current: string[] | undefined;
  for (const line of text.split('\n')) {
    if (line.startsWith('/')) out.set(line.trim(), (current = []));
    else if (current && /^\s+0x[0-9a-f]+\s*$/i.test(line)) current.push(BigInt(line.trim()).toString(16).padStart(16, '0'));
  }
  return out;
}

/**
 * Keeps a candidate campaigning until `signal` aborts: campaign, wait for the term to end, campaign
 * again (what the lifecycle manager does, reduced to the loop). Resolves when stopped.
 */
export async function keepCampaigning(candidate: { campaign(o: { signal: AbortSignal }): Promise<{ signal: AbortSignal }> }, signal: AbortSignal): Promise<void> {
  while (!signal.aborted) {
    try {
      const term = await candidate.campaign({ signal });
      await new Promise<void>((r) => {
        if (term.signal.aborted || signal.aborted) return r();
        term.signal.addEventListener('abort', () => r(), { once: true });
        signal.addEventListener('abort', () => r(), { once: true });
      });
    } catch {
      await new Promise((r) => setTimeout(r, 50));
    }
  }
}
