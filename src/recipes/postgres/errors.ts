import { PermissionDeniedError } from '../../core/errors.js';

/**
 * SQLSTATEs that mean "not with these credentials or this role": 28P01 wrong password, 28000 no
 * pg_hba.conf entry (or SSL required), 42501 insufficient privilege (a table, sequence or schema
 * the role was not granted). Retrying cannot help, so they are not left to look like I/O errors.
 */
const DENIED = new Set(['28P01', '28000', '42501']);

/** A Postgres permission error as a {@link PermissionDeniedError} (message kept: it names the user or object, never a password); others as they are. */
export function mapPgError(e: unknown): unknown {
  const code = (e as { code?: unknown } | null)?.code;
  return typeof code === 'string' && DENIED.has(code) ? new PermissionDeniedError('postgres', `${(e as Error).message} (SQLSTATE ${code})`, { cause: e }) : e;
}
