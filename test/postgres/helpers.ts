import pg from 'pg';
import { FENCE_MARKS } from '../../src/recipes/postgres/keys.js';

export function makePool(config: pg.PoolConfig): pg.Pool {
  const pool = new pg.Pool(config);
  pool.on('error', () => undefined); // idle clients see the server's shutdown at teardown
  return pool;
}

export interface AdvisoryLockRow {
  pid: number;
  granted: boolean;
  classid: number;
  objid: number;
  /** The fence a session lock's holder shows with its marks (holder.ts), when this backend has both. */
  fence?: bigint;
}

/**
 * Advisory locks currently granted or awaited, server-wide. A session lock's two fence marks are
 * folded into its row as `fence`; a mark whose backend holds no other advisory lock (which must
 * never happen) is listed as a row of its own, so "no lock left" checks see it.
 */
export async function advisoryLocks(pool: pg.Pool): Promise<AdvisoryLockRow[]> {
  const r = await pool.query(
    "SELECT pid, granted, classid::int8 AS classid, objid::int8 AS objid FROM pg_locks WHERE locktype = 'advisory' ORDER BY pid, classid, objid",
  );
  const rows: AdvisoryLockRow[] = r.rows.map((x: Record<string, unknown>) => ({ pid: Number(x.pid), granted: x.granted as boolean, classid: Number(x.classid), objid: Number(x.objid) }));
  const isMark = (l: AdvisoryLockRow): boolean => l.classid === FENCE_MARKS.high || l.classid === FENCE_MARKS.low;
  const locks = rows.filter((l) => !isMark(l));
  const marks = rows.filter(isMark);
  for (const l of locks) {
    const hi = marks.find((m) => m.pid === l.pid && m.classid === FENCE_MARKS.high);
    const lo = marks.find((m) => m.pid === l.pid && m.classid === FENCE_MARKS.low);
    if (hi && lo) l.fence = (BigInt(hi.objid) << 32n) | BigInt(lo.objid);
  }
  return [...locks, ...marks.filter((m) => !locks.some((l) => l.pid === m.pid))];
}

export const fixture = (name: string): string => new URL(`./fixtures/${name}`, import.meta.url).pathname;

export { pollValue as until } from '../helpers/wait.js';
