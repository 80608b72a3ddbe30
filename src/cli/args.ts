import { InvalidArgumentError } from 'commander';

/** The stores `--backend` accepts. */
export const BACKENDS = ['etcd', 'zk', 'redis', 'postgres'] as const;
export type BackendName = (typeof BACKENDS)[number];

const UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/**
 * Parses a duration flag: `500ms`, `10s`, `1.5m`, `1h`, or a bare number of seconds (as
 * `timeout(1)` and `sleep(1)` read one). Throws commander's InvalidArgumentError, which names the
 * flag in the one-line usage error.
 */
export function duration(options: { min?: number; allowZero?: boolean } = {}): (value: string) => number {
  const min = options.min ?? 1;
  return (value: string) => {
    const m = /^(\d+(?:\.\d+)?)(ms|s|m|h)?$/.exec(value.trim());
    if (!m) throw new InvalidArgumentError(`'${value}' is not a duration (e.g. 500ms, 10s, 2m)`);
    const ms = Math.round(Number(m[1]) * UNITS[m[2] ?? 's']!);
    if (ms === 0 && options.allowZero) return 0;
    if (ms < min) throw new InvalidArgumentError(`'${value}' is shorter than ${min} ms`);
    if (ms > 2 ** 31 - 1) throw new InvalidArgumentError(`'${value}' is longer than 24 days`);
    return ms;
  };
}

/** Parses `--endpoints`: a comma-separated list, none empty. */
export function endpointList(value: string): string[] {
  const list = value.split(',').map((e) => e.trim());
  if (list.length === 0 || list.some((e) => e.length === 0)) throw new InvalidArgumentError(`'${value}' is not a comma-separated list of endpoints`);
  return list;
}

/** Parses `--name` and `--id`: non-empty, at most 256 characters, no control characters. */
export function label(value: string): string {
  // eslint-disable-next-line no-control-regex -- refusing control characters is the point
  if (value.length === 0 || value.length > 256 || /[\u0000-\u001f]/.test(value)) throw new InvalidArgumentError(`'${value}' must be 1 to 256 printable characters`);
  return value;
}

/** A duration for status lines: `10s`, `1500ms`. */
export function showMs(ms: number): string {
  return ms % 1000 === 0 ? `${ms / 1000}s` : `${ms}ms`;
}
