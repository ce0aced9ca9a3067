import {
  Counter,
  Gauge,
  Histogram,
  type MetricObjectWithValues,
  type MetricValue,
  Registry,
} from "prom-client";

type Labels = Readonly<Record<string, string>>;

/** Labels with their names in sorted order, as the exposition has always printed them. */
function sortedLabels(labels: Labels = {}): Record<string, string> {
  return Object.fromEntries(Object.entries(labels).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}

/**
 * Series read at scrape time from another component (lineage, provider counters, the janitor):
 * each family's name, help and type stay the same between calls, only its samples change.
 */
export interface Collector {
  collect(): {
    name: string;
    help: string;
    type: "counter" | "gauge";
    samples: { labels?: Labels; value: number }[];
  }[];
}

/**
 * Every Factflow metric, in one prom-client registry; one instance per server or CLI run (no
 * global registry, so two runtimes in one process never mix their counts).
 */
export class FactflowMetrics {
  readonly registry = new Registry();
  readonly messages = new Counter({
    name: "factflow_messages_total",
    help: "Deliveries handled, by route, queue and settlement status (ACKNOWLEDGED, FAILED, REJECTED, INCOMPLETE).",
    labelNames: ["route", "queue", "status"] as const,
    registers: [this.registry],
  });
  readonly retries = new Counter({
    name: "factflow_retries_total",
    help: "Deliveries retried (the next attempt's copy confirmed by the broker), by route: a FAILED result, or a handler that threw, timed out or returned no settling status.",
    labelNames: ["route"] as const,
    registers: [this.registry],
  });
  readonly deadLetters = new Counter({
    name: "factflow_dead_letters_total",
    help: "Deliveries dead-lettered (rejected, retry budget exhausted, last attempt incomplete, failed topic delivery, not a Factflow message), by route.",
    labelNames: ["route"] as const,
    registers: [this.registry],
  });
  readonly inFlight = new Gauge({
    name: "factflow_messages_in_flight",
    help: "Handlers running now, by route.",
    labelNames: ["route"] as const,
    registers: [this.registry],
  });
  readonly executions = new Counter({
    name: "factflow_executions_total",
    help: "Executions finished, by final status.",
    labelNames: ["status"] as const,
    registers: [this.registry],
  });
  readonly executionsRunning = new Gauge({
    name: "factflow_executions_running",
    help: "Executions running in this process.",
    registers: [this.registry],
  });
  readonly completionSeconds = new Histogram({
    name: "factflow_execution_completion_seconds",
    help: "Time from execution creation to its final status.",
    buckets: [0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600],
    registers: [this.registry],
  });
  readonly handlerSeconds = new Histogram({
    name: "factflow_handler_seconds",
    help: "Time one delivery spent in its route handler (adapters and lineage writes), by route.",
    labelNames: ["route"] as const,
    buckets: [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 30],
    registers: [this.registry],
  });
  readonly queueWaitSeconds = new Histogram({
    name: "factflow_queue_wait_seconds",
    help: "Time a message waited on its queue between publish and the start of its first delivery, by route.",
    labelNames: ["route"] as const,
    buckets: [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 30, 300],
    registers: [this.registry],
  });

  /** Registers a collector's families; their samples are read on every scrape. */
  addCollector(collector: Collector): void {
    for (const family of collector.collect()) {
      const { name, help, type } = family;
      this.registry.registerMetric({
        name,
        help,
        type,
        aggregator: "sum",
        get: async (): Promise<MetricObjectWithValues<MetricValue<string>>> => {
          const current = collector.collect().find((f) => f.name === name);
          return {
            name,
            help,
            type,
            aggregator: "sum",
            values: (current?.samples ?? []).map((s) => ({ labels: sortedLabels(s.labels), value: s.value })),
          } as unknown as MetricObjectWithValues<MetricValue<string>>;
        },
        reset: () => {},
      } as unknown as Parameters<Registry["registerMetric"]>[0]);
    }
  }

  /** Current value of one labelled series of a counter or gauge (0 when it has none yet). */
  async valueOf(metric: Counter<string> | Gauge<string>, labels: Labels = {}): Promise<number> {
    const { values } = await metric.get();
    const wanted = Object.entries(labels);
    return values.find((v) => wanted.every(([k, value]) => v.labels[k] === value))?.value ?? 0;
  }

  /** The Prometheus text exposition (version 0.0.4). */
  render(): Promise<string> {
    return this.registry.metrics();
  }
}
