/** What the demo records for its summary and its chart: times in ms from the section's start. */
export interface TermSpan {
  name: string;
  fence: string;
  start: number;
  end?: number;
  /** How it ended, in words (`SIGKILL`, `resigned`, `lost: deadline`, …). */
  ended: string;
  writes: number;
}

export interface WriteMark {
  name: string;
  fence: string;
  t: number;
  rejected: boolean;
  highest?: string;
}

export interface Fault {
  kind: 'SIGKILL' | 'SIGSTOP' | 'resign' | 'SIGTERM';
  name: string;
  t: number;
  /** SIGSTOP: when SIGCONT came. */
  until?: number;
}

export interface Gap {
  /** What caused it: the fault's kind. */
  cause: string;
  from: number;
  to: number;
  /** The successor. */
  name: string;
}

export interface Section {
  title: string;
  backend: string;
  ttlMs: number;
  t0: bigint;
  rows: string[];
  terms: TermSpan[];
  writes: WriteMark[];
  faults: Fault[];
  gaps: Gap[];
  durationMs: number;
}

export function newSection(title: string, backend: string, ttlMs: number, rows: string[]): Section {
  return { title, backend, ttlMs, t0: process.hrtime.bigint(), rows, terms: [], writes: [], faults: [], gaps: [], durationMs: 0 };
}

/** ms since the section began, for a monotonic stamp (ns) taken in any process. */
export const at = (s: Section, t: bigint = process.hrtime.bigint()): number => Number(t - s.t0) / 1e6;

/** The open term of `name`, if any. */
export const openTerm = (s: Section, name: string): TermSpan | undefined => s.terms.findLast((t) => t.name === name && t.end === undefined);
