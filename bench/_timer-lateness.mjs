/**
 * Preloaded with `NODE_OPTIONS=--import=./bench/_timer-lateness.mjs`: a 100 ms timer over the whole
 * life of a process (module loading included); at exit, prints to stderr one line
 * `timer-lateness {"maxMs":…,"late":[[dueAtMs, lateMs], …],"totalMs":…}` listing every firing more
 * than 50 ms late. Measures a command such as `pnpm factflow run` from outside its code.
 */
import { performance } from "node:perf_hooks";

const start = performance.now();
let due = start + 100;
let max = 0;
const late = [];
const tick = () => {
  const now = performance.now();
  const lateness = now - due;
  if (lateness > max) max = lateness;
  if (lateness > 50) late.push([Math.round(due - start), Math.round(lateness)]);
  due = now + 100;
  // Never the reason the process stays alive.
  setTimeout(tick, 100).unref();
};
setTimeout(tick, 100).unref();
process.on("exit", () => {
  const totalMs = Math.round(performance.now() - start);
  process.stderr.write(`timer-lateness ${JSON.stringify({ maxMs: Math.round(max), late, totalMs })}\n`);
});
