/**
 * "Did you mean" for an unknown option name: the names users bring from tenure's earlier
 * versions and from the libraries it is modelled on, a unit left off or spelled out, a typo. A
 * safety library's timings are too important to guess at, so an unknown key is refused (see
 * `requireOptions`); this only makes the refusal say what to write instead.
 */

/**
 * Names from elsewhere → tenure's names for the same thing, best first; the first one the options
 * type has is suggested. Keys are normalized (lower case, no `_`/`-`).
 */
const ELSEWHERE: Record<string, readonly string[]> = {};
function alias(names: string, to: readonly string[]): void {
  for (const n of names.split(' ')) ELSEWHERE[normalize(n)] = to;
}
// The lease's length: tenure's earlier ttlSeconds (etcd), sessionTimeoutMs (ZooKeeper), leaseMs
// (Postgres); Curator's sessionTimeoutMs, etcd3's lease ttl (seconds), client-go's leaseDuration,
// redlock's duration, redis-semaphore's lockTimeout, node-zookeeper-client's sessionTimeout.
alias('ttl ttlSec ttlSecs ttlSeconds sessionTimeout sessionTimeoutMs sessionTimeoutMillis sessionTtl leaseMs lease leaseTtl leaseTime leaseTimeMs leaseDuration leaseDurationMs leaseDurationSeconds leaseTimeout expiry expiryMs expire expires expiresIn expiration px duration durationMs lockTtl lockDuration lockLease', ['ttlMs']);
// On a wait's options (no TTL there), Postgres's lock_timeout: the wait's bound.
alias('lockTimeout lockTimeoutMs', ['ttlMs', 'timeoutMs']);
// The wait's bound (Curator's acquire(time, unit), redis-semaphore's acquireTimeout); on a
// store-wide object the call bound, on a manager the drain, on a ZooKeeper session its timeout.
alias('timeout waitTimeout waitTimeoutMs acquireTimeout acquireTimeoutMs maxWait maxWaitMs waitMs', ['timeoutMs', 'callTimeoutMs', 'drainTimeoutMs', 'ttlMs']);
alias('requestTimeout requestTimeoutMs commandTimeout commandTimeoutMs callTimeout statementTimeout statement_timeout queryTimeout queryTimeoutMs', ['callTimeoutMs']);
alias('connectionTimeout connectionTimeoutMs connectionTimeoutMillis connectTimeout connectTimeoutMillis', ['connectTimeoutMs']);
alias('idleInTransactionSessionTimeout idle_in_transaction_session_timeout', ['idleTimeoutMs']);
alias('grace gracePeriod gracePeriodMs shutdownTimeout shutdownTimeoutMs stopTimeout drain', ['drainTimeoutMs']);
// The margin before the store's expiry: client-go's renewDeadline (the rest of the lease),
// redlock's driftFactor.
alias('margin marginMs safetyMargin renewDeadline renewDeadlineMs driftFactor clockDrift clockDriftMs', ['safetyMarginMs']);
// Retries: tenure's earlier minBackoffMs/maxBackoffMs (Postgres), redlock's retryDelay/retryJitter,
// client-go's retryPeriod; a count of tries is a time bound in tenure.
alias('minBackoffMs maxBackoffMs minBackoff maxBackoff backoffMs retryBackoff retryBackoffMs', ['backoff', 'retryMaxMs', 'retryDelayMs']);
alias('retryDelay retryJitter retryPeriod retryPeriodMs retryInterval retryIntervalMs', ['retryDelayMs', 'retryMaxMs', 'backoff']);
alias('retries retryCount maxRetries retry retryTimes attempts', ['maxAttempts', 'timeoutMs']);
alias('min minMs minDelay minDelayMs initial initialDelay initialDelayMs base baseMs baseDelay', ['initialMs']);
alias('max maxDelay maxDelayMs cap capMs', ['maxMs', 'retryMaxMs']);
// Who: client-go's identity, Curator's participant id.
alias('identity holderIdentity participantId participant clientId nodeId owner ownerId instanceId', ['id']);
// Where: Curator's connectString, etcd's endpoints, node-zookeeper-client's connection string.
alias('connectString connection servers server endpoints endpoint urls url address hosts host', ['connectionString', 'hosts']);
alias('prefix lockPrefix keyspace', ['keyPrefix', 'namespace']);
alias('log', ['logger']);
alias('abortSignal cancel cancelSignal', ['signal']);
alias('tz zone', ['timezone']);
alias('pollInterval pollIntervalMs pollMs observeInterval watchInterval', ['observeIntervalMs']);

function normalize(name: string): string {
  return name.toLowerCase().replace(/[_\-\s]/g, '');
}

/** The name without its unit: `ttlSeconds`, `ttlMs` and `ttl` are all `ttl`. */
function stem(name: string): string {
  const n = normalize(name);
  return n.replace(/(milliseconds?|millis|msecs?|ms|seconds?|secs?)$/, '') || n;
}

/** Optimal string alignment distance (Damerau–Levenshtein with adjacent swaps). */
function distance(a: string, b: string): number {
  const d = Array.from({ length: a.length + 1 }, (_, i) => [i, ...new Array<number>(b.length).fill(0)]);
  for (let j = 1; j <= b.length; j++) d[0]![j] = j;
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let v = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) v = Math.min(v, d[i - 2]![j - 2]! + 1);
      d[i]![j] = v;
    }
  }
  return d[a.length]![b.length]!;
}

/** The known option `key` was most likely meant as, or undefined when none is near. */
export function suggestOption(key: string, known: readonly string[]): string | undefined {
  const n = normalize(key);
  const exact = known.find((k) => normalize(k) === n);
  if (exact) return exact;
  const elsewhere = ELSEWHERE[n]?.find((k) => known.includes(k));
  if (elsewhere) return elsewhere;
  const s = stem(key);
  const sameStem = known.find((k) => stem(k) === s);
  if (sameStem) return sameStem;
  const limit = s.length <= 4 ? 1 : s.length <= 8 ? 2 : 3;
  let best: string | undefined;
  let bestD = limit + 1;
  for (const k of known) {
    const d = distance(s, stem(k));
    if (d < bestD) [best, bestD] = [k, d];
  }
  return best;
}

/** The sentence after `<key>: ` in the ConfigError for an unknown option. */
export function unknownOptionMessage(key: string, known: readonly string[]): string {
  const hint = suggestOption(key, known);
  if (hint === undefined) return known.length ? `unknown option; the options are ${known.join(', ')}` : 'unknown option; this takes no options';
  // A name without a unit (ttl) or in seconds (ttlSeconds) for one in ms: say the unit.
  const unit = hint.endsWith('Ms') && !/ms$/i.test(key) ? ' (milliseconds)' : '';
  return `unknown option; did you mean '${hint}'${unit}?`;
}
