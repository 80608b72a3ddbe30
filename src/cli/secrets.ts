import { readFileSync, statSync } from 'node:fs';
import { ConfigError } from '../core/errors.js';
import { redactText } from '../core/redact.js';

/**
 * The CLI's secrets: where a password comes from (a file or the environment, never the command
 * line, which `ps` and shell history show), how every line tenure writes is kept free of it, and
 * which variables the supervised command does not inherit.
 */

/** Every secret this process holds, masked in every line it writes. */
const known = new Set<string>();

/** Remembers a secret (and its URL-decoded form) so that {@link redact} masks it. */
export function addSecret(secret: string | undefined): void {
  if (!secret) return;
  known.add(secret);
  try {
    known.add(decodeURIComponent(secret));
  } catch {
    // not URL-encoded
  }
}

/** The text with every known secret, URL password and `password=` parameter masked (core's one redaction). */
export function redact(text: string): string {
  return redactText(text, known);
}

/** The passwords an endpoint carries: a URL's `user:password@` and its `password=` parameter. */
export function endpointSecrets(endpoint: string): string[] {
  const found: string[] = [];
  const m = /^(?:[a-z][a-z0-9+.-]*:\/\/)?(.*)@/is.exec(endpoint); // up to the last '@'
  const colon = m?.[1]!.indexOf(':') ?? -1;
  if (m && colon >= 0 && colon < m[1]!.length - 1) found.push(m[1]!.slice(colon + 1));
  for (const p of endpoint.matchAll(/[?&]password=([^&]*)/gi)) if (p[1]) found.push(p[1]);
  return found;
}

/**
 * The variables tenure reads secrets from. The command does not inherit them unless `--pass-env`
 * names them: TENURE_PASSWORD; TENURE_ENDPOINTS when an endpoint in it carries a password;
 * PGPASSWORD on Postgres (the client reads it as tenure's password).
 */
export const WITHHELD = ['TENURE_PASSWORD', 'TENURE_ENDPOINTS', 'PGPASSWORD'] as const;

/** Registers the secrets in tenure's environment before anything can print (a usage error included). */
export function registerEnvSecrets(env: NodeJS.ProcessEnv = process.env): void {
  addSecret(env.TENURE_PASSWORD);
  addSecret(env.PGPASSWORD);
  for (const e of (env.TENURE_ENDPOINTS ?? '').split(',')) for (const s of endpointSecrets(e)) addSecret(s);
}

/** The environment the supervised command gets: tenure's own, without its secrets unless `passEnv` names them. */
export function childEnv(flags: { backend: string; passEnv?: readonly string[] | undefined }, env: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv {
  const out = { ...env };
  const pass = flags.passEnv ?? [];
  const withheld = (v: string): boolean => !pass.includes('all') && !pass.includes(v);
  if (withheld('TENURE_PASSWORD')) delete out.TENURE_PASSWORD;
  if (withheld('TENURE_ENDPOINTS') && (env.TENURE_ENDPOINTS ?? '').split(',').some((e) => endpointSecrets(e).length > 0)) delete out.TENURE_ENDPOINTS;
  if (withheld('PGPASSWORD') && flags.backend === 'postgres') delete out.PGPASSWORD;
  return out;
}

/**
 * The password: the first line of `--password-file` (a trailing newline dropped), else
 * TENURE_PASSWORD. `warn` hears of a file that others may read.
 */
export function readPassword(file: string | undefined, warn: (text: string) => void, env: NodeJS.ProcessEnv = process.env): string | undefined {
  if (file === undefined) {
    addSecret(env.TENURE_PASSWORD);
    return env.TENURE_PASSWORD || undefined;
  }
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
    if ((statSync(file).mode & 0o077) !== 0) warn(`--password-file '${file}' can be read by group or others (chmod 600 it)`);
  } catch (e) {
    throw new ConfigError('--password-file', `cannot read '${file}' (${(e as NodeJS.ErrnoException).code ?? 'error'})`);
  }
  const password = text.replace(/\r?\n$/, '');
  addSecret(password);
  if (password === '' || /[\r\n]/.test(password)) throw new ConfigError('--password-file', `'${file}' must hold the password on one line`);
  return password;
}

/** Reads a PEM file a TLS flag names. */
export function readPem(flag: string, file: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch (e) {
    throw new ConfigError(flag, `cannot read '${file}' (${(e as NodeJS.ErrnoException).code ?? 'error'})`);
  }
}
