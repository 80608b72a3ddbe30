/**
 * The exit codes of the `tenure` CLI. Besides these, `run` and `lock` exit with the child's own
 * status (a child killed by a signal gives 128 + the signal's number, as a shell reports it).
 */
export const EXIT = Object.freeze({
  /** A bad flag or value, a missing command, a backend whose client package is not installed. */
  usage: 2,
  /** The store could not be reached (or refused us) at start-up (sysexits EX_UNAVAILABLE). */
  unavailable: 69,
  /** An unexpected internal error (sysexits EX_SOFTWARE). */
  software: 70,
  /** Leadership or the lock was lost while the child ran; the child was stopped (sysexits EX_TEMPFAIL: try again). */
  lost: 75,
  /** `tenure lock --timeout` passed before the lock was granted (as `timeout(1)`). */
  timeout: 124,
  /** The command could not be run (not executable). */
  cannotExecute: 126,
  /** The command was not found. */
  notFound: 127,
});
