import pg from 'pg';

export function makePool(config: pg.PoolConfig): pg.Pool {
  const pool = new pg.Pool(config);
  pool.on('error', () => undefined); // idle clients see the server's shutdown at teardown
  return pool;
}

/** Advisory locks currently granted or awaited, server-wide. */
export async function advisoryLocks(pool: pg.Pool): Promise<{ pid: number; granted: boolean; classid: number; objid: number }[]> {
  const r = await pool.query(
    "SELECT pid, granted, classid::int8 AS classid, objid::int8 AS objid FROM pg_locks WHERE locktype = 'advisory'",
  );
  return r.rows.map((x: Record<string, unknown>) => ({ pid: Number(x.pid), granted: x.granted as boolean, classid: Number(x.classid), objid: Number(x.objid) }));
}

export const fixture = (name: string): string => new URL(`./fixtures/${name}`, import.meta.url).pathname;

export { pollValue as until } from '../helpers/wait.js';
