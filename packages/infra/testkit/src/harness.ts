import { randomBytes } from "node:crypto";
import type {
  DeadLetter,
  DeadLetterSource,
  Destination,
  DestinationStats,
  MessageHandler,
  ProviderCapabilities,
  QueueProtocol,
  SubscribeOptions,
  Subscription,
} from "@factflow/protocols";
import { it } from "vitest";
import type { ConnectOverride, ResolvedOptions } from "./options.js";
import type { GroupName, SuiteReport } from "./report.js";
import { sleep, waitFor } from "./wait-for.js";

/** Bounds a cleanup step so a provider that hangs on close cannot hang the run. */
async function bounded(work: Promise<unknown>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([
    work.catch(() => undefined),
    new Promise<void>((resolve) => {
      timer = setTimeout(resolve, ms);
    }),
  ]);
  clearTimeout(timer);
}

/** State shared by every test of one suite run. */
export class SuiteEnv {
  /** Unique per run, so runs against a shared broker never see each other's messages. */
  readonly runId = `ct-${Date.now().toString(36)}-${randomBytes(3).toString("hex")}`;
  readonly destinations = new Set<string>();
  private counter = 0;
  private caps: Promise<ProviderCapabilities> | undefined;

  constructor(
    readonly options: ResolvedOptions,
    readonly report: SuiteReport,
  ) {}

  /** The provider's capabilities, read once from an unconnected instance. */
  capabilities(): Promise<ProviderCapabilities> {
    this.caps ??= (async () => {
      const provider = await this.options.createProvider();
      const caps = provider.capabilities;
      await bounded(provider.close(), 5_000);
      return caps;
    })();
    return this.caps;
  }

  /** A destination no other test of this run (or any other run) uses. */
  destination(kind: "queue" | "topic", label: string): Destination {
    this.counter += 1;
    const destination = `/${kind}/${this.runId}/${label}-${this.counter}` as Destination;
    this.destinations.add(destination);
    return destination;
  }
}

/** What a test body gets: fresh names, connected providers and cleanup it does not have to write. */
export class TestHarness {
  private readonly providers: QueueProtocol[] = [];
  private readonly subscriptions: Subscription[] = [];

  constructor(
    readonly env: SuiteEnv,
    readonly caps: ProviderCapabilities,
  ) {}

  get timing() {
    return this.env.options.timing;
  }

  get expectations() {
    return this.env.options.expectations;
  }

  /** A queue name no other test (or run) uses. */
  queue(label: string): Destination {
    return this.env.destination("queue", label);
  }

  /** A topic name no other test (or run) uses. */
  topic(label: string): Destination {
    return this.env.destination("topic", label);
  }

  /** Builds a provider without connecting it; it is closed when the test ends. */
  async build(override?: ConnectOverride): Promise<QueueProtocol> {
    const provider = await this.env.options.createProvider(override);
    this.providers.push(provider);
    return provider;
  }

  /** Builds and connects a provider; it is closed when the test ends. */
  async provider(override?: ConnectOverride): Promise<QueueProtocol> {
    const provider = await this.build(override);
    await provider.connect();
    return provider;
  }

  /** Subscribes and unsubscribes again when the test ends. */
  async subscribe(
    provider: QueueProtocol,
    destination: string,
    handler: MessageHandler,
    options: SubscribeOptions,
  ): Promise<Subscription> {
    const subscription = await provider.subscribe(destination, handler, options);
    this.subscriptions.push(subscription);
    return subscription;
  }

  /** Watches for `quietPeriodMs` (plus `extraMs`): the one fixed wait, used to show that nothing more happens. */
  quiet(extraMs = 0): Promise<void> {
    return sleep(this.timing.quietPeriodMs + extraMs);
  }

  /** Polls stats until `accept` holds, allowing the provider's documented stats lag. */
  async statsUntil(
    provider: QueueProtocol,
    source: DeadLetterSource,
    accept: (stats: DestinationStats) => boolean,
    what: string,
  ): Promise<DestinationStats> {
    let last: DestinationStats | undefined;
    return waitFor(
      async () => {
        last = await provider.admin.stats(source);
        return accept(last) ? last : undefined;
      },
      {
        timeoutMs: this.timing.deliveryTimeoutMs + this.expectations.statsLagMs,
        intervalMs: 50,
        description: () => `stats of ${source.destination} to show ${what} (last: ${JSON.stringify(last)})`,
      },
    );
  }

  /** Every dead letter of `source`, paging through the browse API. */
  async allDeadLetters(
    provider: QueueProtocol,
    source: DeadLetterSource,
    pageSize = 100,
  ): Promise<DeadLetter[]> {
    const items: DeadLetter[] = [];
    for (let offset = 0; ; offset += pageSize) {
      const page = await provider.admin.browseDeadLetters(source, { offset, limit: pageSize });
      items.push(...page.items);
      if (page.items.length < pageSize || items.length >= page.total) {
        if (items.length !== page.total) {
          throw new Error(
            `[factflow/infra-testkit] browsing the dead letters of ${source.destination} reported total ${page.total} but its pages held ${items.length} items`,
          );
        }
        return items;
      }
    }
  }

  /** Waits until the dead letters of `source` number exactly `n`. */
  async deadLettersUntil(provider: QueueProtocol, source: DeadLetterSource, n: number, timeoutMs?: number) {
    let total = -1;
    await waitFor(
      async () => {
        total = (await provider.admin.browseDeadLetters(source, { offset: 0, limit: 1 })).total;
        return total === n;
      },
      {
        timeoutMs: timeoutMs ?? this.timing.deliveryTimeoutMs,
        intervalMs: 50,
        description: () =>
          `${n} dead letters in ${source.destination}${source.subscription === undefined ? "" : ` (subscription ${source.subscription})`}, have ${total}`,
      },
    );
    return this.allDeadLetters(provider, source);
  }

  /** Prints a line in the test output and keeps it for the summary. */
  note(line: string): void {
    console.info(`[factflow/infra-testkit] ${line}`);
    this.env.report.note(line);
  }

  async dispose(): Promise<void> {
    for (const subscription of this.subscriptions.splice(0)) await bounded(subscription.unsubscribe(), 5_000);
    for (const provider of this.providers.splice(0)) await bounded(provider.close(), 10_000);
  }
}

/** A conformance test: a group, a title, and optionally a reason it does not apply to this provider. */
export interface ConformanceTest {
  readonly title: string;
  readonly timeoutMs?: number;
  /** Returns why the test does not apply (naming the capability), or undefined when it does. */
  readonly notRunWhen?: (caps: ProviderCapabilities, env: SuiteEnv) => string | undefined;
  readonly body: (h: TestHarness) => Promise<void>;
}

/** Registers one vitest test that records its outcome in the report. */
export function defineTest(env: SuiteEnv, group: GroupName, test: ConformanceTest): void {
  it(
    test.title,
    async (context) => {
      const caps = await env.capabilities();
      const whyNot = test.notRunWhen?.(caps, env);
      if (whyNot !== undefined) {
        env.report.notRun(group, whyNot);
        context.skip(`not run: ${whyNot}`);
      }
      const harness = new TestHarness(env, caps);
      try {
        await test.body(harness);
        env.report.passed(group);
      } catch (error) {
        env.report.failed(group);
        throw error;
      } finally {
        await harness.dispose();
      }
    },
    test.timeoutMs ?? 30_000 + env.options.timing.deliveryTimeoutMs + env.options.expectations.statsLagMs,
  );
}
