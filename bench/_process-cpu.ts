/**
 * CPU time of the processes a relay runs on, read from `/proc` (Linux): this process, the broker's
 * and PostgreSQL's. On a machine whose cores the three share, what each spends per message says
 * where a relay's throughput goes, which the rates alone do not.
 */
import { execFileSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";

/** Cumulative CPU milliseconds (user + system) of each process group. */
export interface CpuSample {
  readonly node: number;
  readonly broker: number;
  readonly postgres: number;
}

/** Which processes are the broker's, by their `comm` and command line. */
export type BrokerMatcher = (comm: string, cmdline: string) => boolean;

interface ProcStat {
  readonly pid: number;
  readonly comm: string;
  readonly ppid: number;
  /** utime + stime, in clock ticks. */
  readonly own: number;
  /** cutime + cstime: children that exited and were waited for, in clock ticks. */
  readonly children: number;
}

/**
 * A function that samples the CPU time used so far, or `undefined` where `/proc` cannot be read
 * (then the benches print no CPU figures).
 */
export function processCpuSampler(isBroker: BrokerMatcher): (() => CpuSample) | undefined {
  try {
    readFileSync("/proc/self/stat", "utf8");
  } catch {
    return undefined;
  }
  const msPerTick = 1000 / clockTicks();
  const brokerPids = new Map<number, boolean>();
  return () => {
    const stats = readStats();
    const byPid = new Map(stats.map((s) => [s.pid, s]));
    let broker = 0;
    let postgres = 0;
    for (const s of stats) {
      let matches = brokerPids.get(s.pid);
      if (matches === undefined) {
        matches = isBroker(s.comm, cmdlineOf(s.pid));
        brokerPids.set(s.pid, matches);
      }
      if (matches) broker += s.own;
      if (s.comm === "postgres") {
        postgres += s.own;
        // The postmaster also holds what its exited backends used (each closed connection's).
        if (byPid.get(s.ppid)?.comm !== "postgres") postgres += s.children;
      }
    }
    const self = process.cpuUsage();
    return {
      node: (self.user + self.system) / 1000,
      broker: broker * msPerTick,
      postgres: postgres * msPerTick,
    };
  };
}

/** Microseconds per message of each group between two samples. */
export function cpuPerMessage(before: CpuSample, after: CpuSample, messages: number): Record<string, number> {
  const per = (a: number, b: number) => ((b - a) * 1000) / messages;
  return {
    nodeCpuUsPerMsg: per(before.node, after.node),
    brokerCpuUsPerMsg: per(before.broker, after.broker),
    postgresCpuUsPerMsg: per(before.postgres, after.postgres),
  };
}

function readStats(): ProcStat[] {
  const out: ProcStat[] = [];
  for (const entry of readdirSync("/proc")) {
    const pid = Number(entry);
    if (!Number.isInteger(pid)) continue;
    let text: string;
    try {
      text = readFileSync(`/proc/${pid}/stat`, "utf8");
    } catch {
      continue; // gone since the listing
    }
    // "pid (comm) state ppid …": comm may hold spaces and parentheses, so split at the last ")".
    const close = text.lastIndexOf(")");
    const comm = text.slice(text.indexOf("(") + 1, close);
    const fields = text.slice(close + 2).split(" ");
    out.push({
      pid,
      comm,
      ppid: Number(fields[1]),
      own: Number(fields[11]) + Number(fields[12]),
      children: Number(fields[13]) + Number(fields[14]),
    });
  }
  return out;
}

function cmdlineOf(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").replaceAll("\u0000", " ");
  } catch {
    return "";
  }
}

function clockTicks(): number {
  try {
    const ticks = Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim());
    if (Number.isFinite(ticks) && ticks > 0) return ticks;
  } catch {
    // fall through to Linux's usual value
  }
  return 100;
}
