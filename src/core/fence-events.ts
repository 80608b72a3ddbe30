import { channel } from 'node:diagnostics_channel';
import type { StaleFenceError } from './errors.js';

/**
 * The `node:diagnostics_channel` every fenced resource publishes a refused write on, as
 * `{ resource, fence, highest, error }` — how `tenure/metrics` counts stale-fence rejections, and
 * how any other observer (tracing, logs) can, without the resources knowing who listens.
 * Publishing costs nothing while nobody subscribes.
 */
export const STALE_FENCE_CHANNEL = 'tenure:stale-fence';

/** What is published on {@link STALE_FENCE_CHANNEL}. */
export interface StaleFenceEvent {
  /** The resource's name (`FencedResource.name`). */
  readonly resource: string;
  /** The fence the refused write carried. */
  readonly fence: bigint;
  /** The highest fence the resource had accepted. */
  readonly highest: bigint;
  /** The StaleFenceError the write rejected with. */
  readonly error: StaleFenceError;
}

const staleFence = channel(STALE_FENCE_CHANNEL);

/** Publishes a refused write and returns its error, for `throw refused(new StaleFenceError(…))`. */
export function refused(error: StaleFenceError): StaleFenceError {
  if (staleFence.hasSubscribers) staleFence.publish({ resource: error.resource ?? '', fence: error.fence, highest: error.highest, error } satisfies StaleFenceEvent);
  return error;
}
