import { setFlagsFromString } from "node:v8";

/**
 * Makes V8 compile WebAssembly with its baseline compiler only (Liftoff), for this whole process.
 * `factflow run` calls it before opening the embedded database: PGlite is a 9 MB WebAssembly
 * module, and tiering its hot functions up to optimised code costs ~100 MB of memory and CPU time a
 * single short execution never wins back (the example run peaks about 100 MB lower, and ends sooner).
 * `factflow serve`, which runs for a long time, keeps V8's default tiering.
 */
export function preferBaselineWasm(): void {
  setFlagsFromString("--liftoff-only");
}
