/** The test groups of the suite, in the order they run. */
export const GROUPS = [
  "lifecycle",
  "queues",
  "topics",
  "multi-instance",
  "settlement",
  "retry",
  "incomplete",
  "never-settles",
  "released-signals",
  "topic-failure",
  "dead-letters",
  "verdicts",
  "cleanup",
  "stats",
  "ordering: fifo",
  "ordering: message groups",
  "ordering: priorities",
  "ordering: groups with retries",
  "pause/resume",
  "bad-input",
  "faults",
] as const;

export type GroupName = (typeof GROUPS)[number];

interface GroupTally {
  passed: number;
  failed: number;
  notRun: Map<string, number>;
}

/** Counts what happened per group, for the table printed at the end of a run. */
export class SuiteReport {
  private readonly tallies = new Map<GroupName, GroupTally>();
  private readonly notes: string[] = [];

  constructor(private readonly provider: string) {
    for (const group of GROUPS) this.tallies.set(group, { passed: 0, failed: 0, notRun: new Map() });
  }

  passed(group: GroupName): void {
    this.tallies.get(group)!.passed += 1;
  }

  failed(group: GroupName): void {
    this.tallies.get(group)!.failed += 1;
  }

  notRun(group: GroupName, reason: string): void {
    const reasons = this.tallies.get(group)!.notRun;
    reasons.set(reason, (reasons.get(reason) ?? 0) + 1);
  }

  /** A line printed under the table (duplicates seen in the fault group, say). */
  note(line: string): void {
    this.notes.push(line);
  }

  /** The summary table, one row per group. */
  render(): string {
    const rows = GROUPS.map((group) => {
      const t = this.tallies.get(group)!;
      const skipped = [...t.notRun.values()].reduce((a, b) => a + b, 0);
      const status =
        t.failed > 0
          ? "FAILED"
          : t.passed > 0
            ? skipped > 0
              ? "partly run"
              : "passed"
            : skipped > 0
              ? "not run"
              : "—";
      const why = [...t.notRun.keys()].join("; ");
      return [group, status, `${t.passed}`, `${t.failed}`, `${skipped}`, why];
    });
    const header = ["group", "status", "passed", "failed", "not run", "why not run"];
    const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
    const line = (cells: string[]): string =>
      cells
        .map((c, i) => c.padEnd(widths[i]!))
        .join("  ")
        .trimEnd();
    return [
      `[factflow/infra-testkit] conformance summary for provider "${this.provider}"`,
      line(header),
      line(widths.map((w) => "-".repeat(w))),
      ...rows.map(line),
      ...this.notes.map((n) => `note: ${n}`),
    ].join("\n");
  }
}
