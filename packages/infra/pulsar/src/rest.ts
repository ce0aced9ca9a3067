import { setTimeout as sleep } from "node:timers/promises";
import { type Backoff, backoffDelayMs, ProviderError } from "@factflow/protocols";

/** Where the admin REST API is and how long a call may take. */
export interface RestOptions {
  /** `http://host:port` */
  readonly adminUrl: string;
  readonly tenant: string;
  readonly namespace: string;
  readonly timeoutMs: number;
  /**
   * How long a subscription change answered with 412 "Subscription Busy" is retried, in ms. The
   * broker answers so while it cannot fence a subscription's consumers: one being created by another
   * process at the same moment, or consumers of a killed process the broker still counts as
   * connected (until its keep-alive notices). @default 30000
   */
  readonly busyRetryMs?: number;
}

/** Backoff between retries of a busy subscription change. */
const BUSY_BACKOFF: Backoff = { initialDelayMs: 100, maxDelayMs: 2000, jitter: 0.2 };

/** Figures of one subscription, from the topic stats. */
export interface SubscriptionFigures {
  readonly backlog: number;
  readonly consumers: number;
  /**
   * Messages the broker has handed to the consumers and not had acknowledged (counted by the broker
   * on `Shared` subscriptions only; 0 on `Failover` ones).
   */
  readonly unacked: number;
}

/** What a delete of an unused topic did: deleted, found nothing, or refused (`reason` is the broker's). */
export type TopicDeletion =
  | { readonly outcome: "deleted" | "missing" }
  | { readonly outcome: "in-use"; readonly reason: string };

/** One message read with peek: its position on the subscription, broker id and payload bytes. */
export interface PeekedMessage {
  readonly position: number;
  /** `ledger:entry`, as the broker reports it. */
  readonly messageId: string;
  readonly payload: Buffer;
  readonly publishTime: string | undefined;
}

/** Earliest position, for subscriptions that must keep every message published to their topic. */
const EARLIEST = JSON.stringify({ ledgerId: -1, entryId: -1, partitionIndex: -1 });

/**
 * The admin REST calls the provider needs (topics of one tenant/namespace, persistent only).
 * Every call is bounded by `timeoutMs`; failures become `ProviderError`s that say what to check.
 */
export class PulsarRest {
  constructor(private readonly options: RestOptions) {}

  private topicPath(topic: string): string {
    const { adminUrl, tenant, namespace } = this.options;
    return `${adminUrl}/admin/v2/persistent/${tenant}/${namespace}/${topic}`;
  }

  private async call(method: string, url: string, what: string, body?: string): Promise<Response> {
    try {
      return await fetch(url, {
        method,
        signal: AbortSignal.timeout(this.options.timeoutMs),
        ...(body === undefined ? {} : { body, headers: { "content-type": "application/json" } }),
      });
    } catch (error) {
      const timedOut =
        error instanceof Error && (error.name === "TimeoutError" || error.name === "AbortError");
      throw new ProviderError(
        "pulsar",
        timedOut ? "timeout" : "connection",
        `${what}: the admin API at ${this.options.adminUrl} ${timedOut ? `did not answer within ${this.options.timeoutMs} ms` : `is unreachable (${error instanceof Error ? (error.cause instanceof Error ? error.cause.message : error.message) : String(error)})`}; check that the broker runs (scripts/services/pulsar.sh status)`,
        { cause: error },
      );
    }
  }

  /**
   * {@link call} for subscription and topic changes: a 412 whose reason says the subscription is
   * busy is retried with backoff for at most `busyRetryMs`; the last answer is returned.
   */
  private async callUnlessBusy(method: string, url: string, what: string, body?: string): Promise<Response> {
    const deadline = Date.now() + (this.options.busyRetryMs ?? 30_000);
    for (let retry = 1; ; retry++) {
      const response = await this.call(method, url, what, body);
      if (response.status !== 412) return response;
      const text = await response.text().catch(() => "");
      const delay = backoffDelayMs(BUSY_BACKOFF, retry);
      if (!/busy/i.test(text) || Date.now() + delay > deadline)
        return new Response(text, { status: response.status, statusText: response.statusText });
      await sleep(delay);
    }
  }

  private async fail(response: Response, what: string): Promise<never> {
    const text = (await response.text().catch(() => "")).slice(0, 300);
    const reason =
      response.status === 401 || response.status === 403
        ? "authorization"
        : response.status === 404
          ? "not-found"
          : response.status >= 500
            ? "connection"
            : "rejected";
    throw new ProviderError(
      "pulsar",
      reason,
      `${what}: the admin API answered HTTP ${response.status} ${text}`,
    );
  }

  /**
   * The answer to a change of a topic or subscription that may not exist: false on 404 (nothing to
   * change), the admin API's error on any other failure, true once the change was made.
   */
  private async doneUnlessMissing(response: Response, what: string): Promise<boolean> {
    if (response.status === 404) {
      await response.body?.cancel();
      return false;
    }
    if (!response.ok) await this.fail(response, what);
    await response.body?.cancel();
    return true;
  }

  /** Fails unless the namespace exists (the provider's connect check). */
  async checkNamespace(): Promise<void> {
    const { adminUrl, tenant, namespace } = this.options;
    const what = `checking namespace ${tenant}/${namespace}`;
    const response = await this.call("GET", `${adminUrl}/admin/v2/namespaces/${tenant}`, what);
    if (!response.ok && response.status !== 404) await this.fail(response, what);
    const listed = response.ok ? ((await response.json()) as unknown) : [];
    if (!Array.isArray(listed) || !listed.includes(`${tenant}/${namespace}`)) {
      throw new ProviderError(
        "pulsar",
        "not-found",
        `${what}: it does not exist; create it with \`pulsar-admin namespaces create ${tenant}/${namespace}\` or set the tenant/namespace settings`,
        { retryable: false },
      );
    }
  }

  /**
   * Creates a durable subscription, at the earliest position (a queue's shared subscription, a
   * dead-letter topic's retained one: they keep whatever the topic already holds) or the latest (a
   * topic subscription sees what is published from now on). An existing one is left as it is.
   */
  async createSubscription(topic: string, subscription: string, from: "earliest" | "latest"): Promise<void> {
    const what = `creating subscription "${subscription}" on topic "${topic}"`;
    const response = await this.callUnlessBusy(
      "PUT",
      `${this.topicPath(topic)}/subscription/${encodeURIComponent(subscription)}`,
      what,
      from === "earliest" ? EARLIEST : undefined,
    );
    if (response.ok || response.status === 409) {
      await response.body?.cancel();
      return;
    }
    await this.fail(response, what);
  }

  /** Backlog and consumers of every subscription of a topic, or `undefined` when the topic does not exist. */
  async subscriptions(topic: string): Promise<Map<string, SubscriptionFigures> | undefined> {
    const what = `reading the stats of topic "${topic}"`;
    const response = await this.call("GET", `${this.topicPath(topic)}/stats`, what);
    if (response.status === 404) {
      await response.body?.cancel();
      return undefined;
    }
    if (!response.ok) await this.fail(response, what);
    const stats = (await response.json()) as {
      subscriptions?: Record<string, { msgBacklog?: number; consumers?: { unackedMessages?: number }[] }>;
    };
    const out = new Map<string, SubscriptionFigures>();
    for (const [name, sub] of Object.entries(stats.subscriptions ?? {})) {
      const consumers = sub.consumers ?? [];
      const unacked = consumers.reduce((sum, consumer) => sum + (consumer.unackedMessages ?? 0), 0);
      out.set(name, { backlog: sub.msgBacklog ?? 0, consumers: consumers.length, unacked });
    }
    return out;
  }

  /** The `position`-th (1-based) unacknowledged message of a subscription, or `undefined` past the end. */
  async peek(topic: string, subscription: string, position: number): Promise<PeekedMessage | undefined> {
    const what = `browsing message ${position} of subscription "${subscription}" on topic "${topic}"`;
    const response = await this.call(
      "GET",
      `${this.topicPath(topic)}/subscription/${encodeURIComponent(subscription)}/position/${position}`,
      what,
    );
    if (response.status === 404 || response.status === 412 || response.status === 409) {
      await response.body?.cancel();
      return undefined;
    }
    if (!response.ok) await this.fail(response, what);
    const payload = Buffer.from(await response.arrayBuffer());
    return {
      position,
      messageId: response.headers.get("x-pulsar-message-id") ?? "",
      payload,
      publishTime: response.headers.get("x-pulsar-publish-time") ?? undefined,
    };
  }

  /** Local names of every persistent topic in the namespace. */
  async listTopics(): Promise<string[]> {
    const { adminUrl, tenant, namespace } = this.options;
    const what = `listing the topics of ${tenant}/${namespace}`;
    const response = await this.call("GET", `${adminUrl}/admin/v2/persistent/${tenant}/${namespace}`, what);
    if (!response.ok) await this.fail(response, what);
    const names = (await response.json()) as unknown;
    return Array.isArray(names) ? names.map((name) => String(name).split("/").pop() ?? "") : [];
  }

  /**
   * Deletes a topic with its subscriptions unless a producer or consumer, of any client, is
   * connected to it (no `force`): the broker then answers 412, returned as `in-use` with its reason.
   * A forced delete would drop the other clients' producers and consumers, and the broker's
   * WebSocket proxy reconnects them behind their sockets; a socket closed while that reconnect is
   * under way makes the proxy close its shared connection to the broker, so every consumer on it,
   * of any topic, loses what it holds to other consumers (see {@link deleteTopic}).
   */
  async deleteUnusedTopic(topic: string): Promise<TopicDeletion> {
    const what = `deleting topic "${topic}"`;
    const response = await this.callUnlessBusy("DELETE", this.topicPath(topic), what);
    if (response.status === 412) {
      const text = await response.text().catch(() => "");
      let reason = text;
      try {
        reason = String((JSON.parse(text) as { reason?: unknown }).reason ?? text);
      } catch {
        // not JSON: the text as it came
      }
      return { outcome: "in-use", reason: reason.slice(0, 300) || "HTTP 412" };
    }
    return { outcome: (await this.doneUnlessMissing(response, what)) ? "deleted" : "missing" };
  }

  /**
   * Deletes a topic with its subscriptions, forcing producers and consumers off (tooling: a test's
   * or an operator's clean-up). False when it did not exist. Not for a topic other clients may still
   * use: see {@link deleteUnusedTopic}.
   */
  async deleteTopic(topic: string): Promise<boolean> {
    const what = `deleting topic "${topic}"`;
    const response = await this.callUnlessBusy("DELETE", `${this.topicPath(topic)}?force=true`, what);
    return this.doneUnlessMissing(response, what);
  }

  /**
   * Skips every message of a subscription's backlog (the admin API's clear-backlog): the cursor
   * moves to the end of the topic. False when the topic or subscription does not exist.
   */
  async skipAll(topic: string, subscription: string): Promise<boolean> {
    const what = `skipping the backlog of subscription "${subscription}" on topic "${topic}"`;
    const response = await this.callUnlessBusy(
      "POST",
      `${this.topicPath(topic)}/subscription/${encodeURIComponent(subscription)}/skip_all`,
      what,
    );
    return this.doneUnlessMissing(response, what);
  }

  /** Deletes one subscription of a topic (forcing its consumers off). False when it did not exist. */
  async deleteSubscription(topic: string, subscription: string): Promise<boolean> {
    const what = `deleting subscription "${subscription}" of topic "${topic}"`;
    const response = await this.callUnlessBusy(
      "DELETE",
      `${this.topicPath(topic)}/subscription/${encodeURIComponent(subscription)}?force=true`,
      what,
    );
    return this.doneUnlessMissing(response, what);
  }
}
