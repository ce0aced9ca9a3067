/**
 * A small Prometheus text-format registry. Factflow exposes a handful of series, so a dependency
 * such as prom-client would be more code than it saves.
 */

type Labels = Readonly<Record<string, string>>;

function labelKey(labels: Labels): string {
  return Object.keys(labels)
    .sort()
    .map((k) => `${k}="${escapeLabel(labels[k] ?? "")}"`)
    .join(",");
}

function escapeLabel(value: string): string {
  return value.replace(/\\/g, "\\\\").replace(/\n/g, "\\n").replace(/"/g, '\\"');
}

interface Series {
  readonly name: string;
  readonly help: string;
  readonly type: "counter" | "gauge" | "histogram";
  render(): string[];
}

/** A monotonically increasing count per label set. */
export class Counter implements Series {
  readonly type = "counter" as const;
  private readonly values = new Map<string, number>();
  constructor(
    readonly name: string,
    readonly help: string,
  ) {}
  inc(labels: Labels = {}, by = 1): void {
    const key = labelKey(labels);
    this.values.set(key, (this.values.get(key) ?? 0) + by);
  }
  get(labels: Labels = {}): number {
    return this.values.get(labelKey(labels)) ?? 0;
  }
  render(): string[] {
    return [...this.values].map(([key, value]) => `${this.name}${key === "" ? "" : `{${key}}`} ${value}`);
  }
}

/** A value that goes up and down per label set. */
export class Gauge implements Series {
  readonly type = "gauge" as const;
  private readonly values = new Map<string, number>();
  constructor(
    readonly name: string,
    readonly help: string,
  ) {}
  add(labels: Labels, by: number): void {
    const key = labelKey(labels);
    this.values.set(key, (this.values.get(key) ?? 0) + by);
  }
  set(labels: Labels, value: number): void {
    this.values.set(labelKey(labels), value);
  }
  get(labels: Labels = {}): number {
    return this.values.get(labelKey(labels)) ?? 0;
  }
  render(): string[] {
    return [...this.values].map(([key, value]) => `${this.name}${key === "" ? "" : `{${key}}`} ${value}`);
  }
}

/** A cumulative histogram (seconds) without labels. */
export class Histogram implements Series {
  readonly type = "histogram" as const;
  private readonly counts: number[];
  private sum = 0;
  private count = 0;
  constructor(
    readonly name: string,
    readonly help: string,
    private readonly buckets: readonly number[],
  ) {
    this.counts = buckets.map(() => 0);
  }
  observe(value: number): void {
    this.sum += value;
    this.count += 1;
    this.buckets.forEach((bound, i) => {
      if (value <= bound) this.counts[i] = (this.counts[i] ?? 0) + 1;
    });
  }
  render(): string[] {
    const lines = this.buckets.map((bound, i) => `${this.name}_bucket{le="${bound}"} ${this.counts[i] ?? 0}`);
    lines.push(
      `${this.name}_bucket{le="+Inf"} ${this.count}`,
      `${this.name}_sum ${this.sum}`,
      `${this.name}_count ${this.count}`,
    );
    return lines;
  }
}

/** Series read at scrape time from another component (lineage, provider counters). */
export interface Collector {
  collect(): {
    name: string;
    help: string;
    type: "counter" | "gauge";
    samples: { labels?: Labels; value: number }[];
  }[];
}

/** Every Factflow metric; one instance per server or CLI run. */
export class FactflowMetrics {
  readonly messages = new Counter(
    "factflow_messages_total",
    "Deliveries handled, by route, queue and settlement status (ACKNOWLEDGED, FAILED, REJECTED, INCOMPLETE).",
  );
  readonly retries = new Counter(
    "factflow_retries_total",
    "FAILED deliveries that will be retried, by route.",
  );
  readonly deadLetters = new Counter(
    "factflow_dead_letters_total",
    "Deliveries dead-lettered (rejected or retry budget exhausted), by route.",
  );
  readonly inFlight = new Gauge("factflow_messages_in_flight", "Handlers running now, by route.");
  readonly executions = new Counter("factflow_executions_total", "Executions finished, by final status.");
  readonly executionsRunning = new Gauge(
    "factflow_executions_running",
    "Executions running in this process.",
  );
  readonly completionSeconds = new Histogram(
    "factflow_execution_completion_seconds",
    "Time from execution creation to its final status.",
    [0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600],
  );
  readonly handlerSeconds = new Histogram(
    "factflow_handler_seconds",
    "Time one delivery spent in its route handler.",
    [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 30],
  );
  private readonly collectors: Collector[] = [];

  addCollector(collector: Collector): void {
    this.collectors.push(collector);
  }

  /** The Prometheus text exposition (version 0.0.4). */
  render(): string {
    const out: string[] = [];
    const own: Series[] = [
      this.messages,
      this.retries,
      this.deadLetters,
      this.inFlight,
      this.executions,
      this.executionsRunning,
      this.completionSeconds,
      this.handlerSeconds,
    ];
    for (const series of own) {
      out.push(
        `# HELP ${series.name} ${series.help}`,
        `# TYPE ${series.name} ${series.type}`,
        ...series.render(),
      );
    }
    for (const collector of this.collectors) {
      for (const family of collector.collect()) {
        out.push(`# HELP ${family.name} ${family.help}`, `# TYPE ${family.name} ${family.type}`);
        for (const sample of family.samples) {
          const key = labelKey(sample.labels ?? {});
          out.push(`${family.name}${key === "" ? "" : `{${key}}`} ${sample.value}`);
        }
      }
    }
    return `${out.join("\n")}\n`;
  }
}
