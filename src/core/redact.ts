/**
 * Secrets out of errors. A driver error keeps what the driver sent and was configured with:
 * ioredis' handshake ReplyError holds `command: { name: 'hello', args: ['3', 'AUTH', user,
 * password] }`, a pg or Redis message may quote a connection string, a client's options sit on
 * some errors. Every tenure error runs its `cause` chain through {@link redactError}, so
 * `util.inspect(err, { depth: Infinity })`, `JSON.stringify(err.cause)` and pino's `err` /
 * `errWithCause` serializers show no secret.
 */

/** What a redacted value becomes. */
export const REDACTED = '[redacted]';

/** Property names whose value is a secret, whatever it holds. */
const SECRET_KEY = /^(password|passwd|pwd|pass|passphrase|secret|token|authtoken|accesstoken|authinfo|auth|credentials?|connectionstring|privatekey|authorization|sasl)$/i;

/**
 * `scheme://user:password@` (and `scheme://:password@`) and a bare `user:password@host`, up to the
 * last `@` of the word (a password may hold one): keeps the user, drops the password.
 */
const URL_PASSWORD = /(\b[a-z][a-z0-9+.-]*:\/\/[^\s:@/'"]*:)[^\s'"]*@/gi;
const BARE_PASSWORD = /(^|[\s'"(,=])([^\s:@/'"(,=]+:)(?!\/\/)[^\s'"]*@/g;
/** A connection string's `password=…` parameter. */
const PASSWORD_PARAM = /(\bpassword=)[^&\s'"]*/gi;

/** How deep plain objects and arrays below an error are copied and cleaned. */
const MAX_DEPTH = 6;

/** `text` without URL passwords, `password=` parameters and any of `secrets` (longest first). */
export function redactText(text: string, secrets: Iterable<string> = []): string {
  let out = text;
  for (const s of [...secrets].filter(Boolean).sort((a, b) => b.length - a.length)) out = out.split(s).join(REDACTED);
  return out.replace(URL_PASSWORD, `$1${REDACTED}@`).replace(BARE_PASSWORD, `$1$2${REDACTED}@`).replace(PASSWORD_PARAM, `$1${REDACTED}`);
}

function isPlain(v: object): boolean {
  const proto = Object.getPrototypeOf(v) as unknown;
  return proto === Object.prototype || proto === null;
}

/**
 * Cleans `err` and every error it reaches (`cause`, `errors`, any property holding an error) in
 * place, so identity and class survive: secret-named properties (`password`, `authInfo`,
 * `connectionString`, `credentials`, …) become `'[redacted]'`, a driver command's `args` too,
 * and every string — message and stack included — loses URL passwords and each of `secrets`.
 * Plain objects and arrays below are replaced by cleaned copies (the driver's own are never
 * changed); other objects are left alone. Returns `err`.
 */
export function redactError<T>(err: T, secrets: readonly string[] = []): T {
  const seen = new Set<object>();
  const clean = (v: unknown, key: string, depth: number): unknown => {
    if (typeof v === 'string') return SECRET_KEY.test(key) ? REDACTED : redactText(v, secrets);
    if (v === null || typeof v !== 'object') return v;
    if (SECRET_KEY.test(key) && !(v instanceof Error)) return REDACTED;
    if (v instanceof Error) {
      scrubError(v, depth);
      return v;
    }
    if (depth >= MAX_DEPTH) return v;
    if (Array.isArray(v)) return v.map((x) => clean(x, '', depth + 1));
    if (!isPlain(v)) return v;
    const copy: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v)) copy[k] = key === 'command' && k === 'args' ? REDACTED : clean(x, k, depth + 1);
    return copy;
  };
  const scrubError = (e: Error, depth: number): void => {
    if (seen.has(e)) return;
    seen.add(e);
    for (const k of Reflect.ownKeys(e)) {
      if (typeof k !== 'string') continue;
      const d = Object.getOwnPropertyDescriptor(e, k);
      if (!d || !('value' in d)) continue;
      const next = clean(d.value, k, depth + 1);
      if (next === d.value) continue;
      try {
        Object.defineProperty(e, k, { ...d, value: next });
      } catch {
        // A frozen or non-configurable property stays as the driver made it.
      }
    }
  };
  if (err instanceof Error) scrubError(err, 0);
  return err;
}
