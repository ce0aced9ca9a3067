/**
 * What held the event loop at each late timer firing of a bench run:
 *
 *     FACTFLOW_BENCH_TRACE_LATE_MS=50 node --cpu-prof --cpu-prof-dir=prof … bench/_memory-peer.ts 300000 2> late.log
 *     node --import tsx bench/_late-stacks.ts prof/<main thread>.cpuprofile late.log [firings] [frames]
 *
 * For the latest firings first (default 5), sums the profile's samples from when the timer was due
 * to when it fired, per function including its callees, and prints the heaviest (default 20). The
 * main thread's profile is the one whose name ends in `.0.001.cpuprofile`.
 */
import { readFileSync } from "node:fs";

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
}
interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}
interface Profile {
  nodes: ProfileNode[];
  startTime: number;
  samples: number[];
  timeDeltas: number[];
}

const [profilePath, logPath] = process.argv.slice(2);
if (profilePath === undefined || logPath === undefined) {
  console.error("usage: bench/_late-stacks.ts <profile.cpuprofile> <late.log> [firings] [frames]");
  process.exit(2);
}
const firings = Number(process.argv[4] ?? 5);
const frames = Number(process.argv[5] ?? 20);
const profile = JSON.parse(readFileSync(profilePath, "utf8")) as Profile;
const late = readFileSync(logPath, "utf8")
  .split("\n")
  .filter((line) => line.startsWith("late "))
  .map((line) => JSON.parse(line.slice(5)) as { lateMs: number; atUs: number });

const byId = new Map(profile.nodes.map((node) => [node.id, node]));
const parentOf = new Map<number, number>();
for (const node of profile.nodes) for (const child of node.children ?? []) parentOf.set(child, node.id);
const nameOf = (id: number): string => {
  const frame = (byId.get(id) as ProfileNode).callFrame;
  return `${frame.functionName || "(anonymous)"} ${frame.url.split("/").slice(-2).join("/")}:${frame.lineNumber + 1}`;
};
const sampledAt: number[] = [];
let clock = profile.startTime;
for (const delta of profile.timeDeltas) {
  clock += delta;
  sampledAt.push(clock);
}

for (const firing of late.sort((a, b) => b.lateMs - a.lateMs).slice(0, firings)) {
  const from = firing.atUs - firing.lateMs * 1000;
  const inclusive = new Map<string, number>();
  let total = 0;
  for (let i = 0; i < profile.samples.length; i++) {
    const at = sampledAt[i] as number;
    if (at < from || at > firing.atUs) continue;
    const us = profile.timeDeltas[i] as number;
    total += us;
    const seen = new Set<string>();
    for (let id: number | undefined = profile.samples[i]; id !== undefined; id = parentOf.get(id)) {
      const name = nameOf(id);
      if (seen.has(name)) continue;
      seen.add(name);
      inclusive.set(name, (inclusive.get(name) ?? 0) + us);
    }
  }
  const at = ((firing.atUs - profile.startTime) / 1e6).toFixed(1);
  console.log(`${firing.lateMs} ms late at +${at} s (${Math.round(total / 1000)} ms sampled)`);
  const heaviest = [...inclusive].filter(([name]) => !name.startsWith("(root)"));
  for (const [name, us] of heaviest.sort((a, b) => b[1] - a[1]).slice(0, frames)) {
    console.log(`  ${String(Math.round(us / 1000)).padStart(6)} ms  ${name}`);
  }
}
