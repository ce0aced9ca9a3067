import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";

/** Node's `gc`, exposed on first use (a dead-letter memory test wants full collections). */
let exposedGc: (() => void) | undefined;
function gc(): void {
  if (exposedGc === undefined) {
    setFlagsFromString("--expose-gc");
    exposedGc = runInNewContext("gc") as () => void;
  }
  exposedGc();
}

/**
 * Counts how many of the bodies (stored messages, copies) an admin operation read are still reachable. `probe` is handed
 * every body read; every `every` reads it runs a full garbage collection and counts the bodies
 * still alive (held by the admin, or by whatever it returns so far). `peak` is the largest count;
 * `peakMb` the largest growth of heap plus buffer memory over the first sample, after collection
 * (a figure to read, not to assert on: other work in the process moves it too).
 */
export function retainedBodies(every = 100) {
  let refs: WeakRef<object>[] = [];
  let read = 0;
  let peak = 0;
  let base: number | undefined;
  let peakBytes = 0;
  const used = () => {
    const memory = process.memoryUsage();
    return memory.heapUsed + memory.arrayBuffers;
  };
  const sample = () => {
    gc();
    refs = refs.filter((ref) => ref.deref() !== undefined);
    peak = Math.max(peak, refs.length);
    base ??= used();
    peakBytes = Math.max(peakBytes, used() - base);
  };
  return {
    /** Takes the baseline the memory growth is measured from. */
    start(): void {
      gc();
      base = used();
    },
    probe(body: object): void {
      refs.push(new WeakRef(body));
      read += 1;
      if (read % every === 0) sample();
    },
    /** Samples once more and answers the figures so far, then starts a new measurement. */
    take(): { read: number; peak: number; peakMb: number } {
      sample();
      const figures = { read, peak, peakMb: Math.round(peakBytes / 1e5) / 10 };
      refs = [];
      read = 0;
      peak = 0;
      base = undefined;
      peakBytes = 0;
      return figures;
    },
  };
}
