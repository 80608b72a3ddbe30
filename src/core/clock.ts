import { performance } from 'node:perf_hooks';

/**
 * A monotonic clock in milliseconds. Lease math never uses wall-clock time: the process can be
 * paused and the wall clock can jump, the monotonic clock only moves forward.
 * Injectable so tests of pure logic can drive time; recipes talking to real servers use the
 * default {@link monotonicClock}.
 */
export interface Clock {
  /** Milliseconds on a monotonic timeline (only differences are meaningful). */
  now(): number;
}

/** The process's monotonic clock (`performance.now()`). */
export const monotonicClock: Clock = Object.freeze({
  now: () => performance.now(),
});

/**
 * The system-wide monotonic clock in nanoseconds (`CLOCK_MONOTONIC` on Linux), comparable across
 * processes on one machine: use it to order events reported by different processes.
 */
export function monotonicNs(): bigint {
  return process.hrtime.bigint();
}
