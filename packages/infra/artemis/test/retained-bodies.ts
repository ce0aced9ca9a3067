import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";

setFlagsFromString("--expose-gc");
const gc = runInNewContext("gc") as () => void;

/**
 * Counts how many of the messages (bodies) an admin operation read are still reachable. `probe` is handed
 * every body read; every `every` reads it runs a full garbage collection and counts the bodies
 * still alive (held by the admin, or by whatever it returns so far). `peak` is the largest count.
 */
export function retainedBodies(every = 100) {
  let refs: WeakRef<object>[] = [];
  let read = 0;
  let peak = 0;
  const sample = () => {
    gc();
    refs = refs.filter((ref) => ref.deref() !== undefined);
    peak = Math.max(peak, refs.length);
  };
  return {
    probe(body: object): void {
      refs.push(new WeakRef(body));
      read += 1;
      if (read % every === 0) sample();
    },
    /** Samples once more and answers the figures so far, then starts a new measurement. */
    take(): { read: number; peak: number } {
      sample();
      const figures = { read, peak };
      refs = [];
      read = 0;
      peak = 0;
      return figures;
    },
  };
}
