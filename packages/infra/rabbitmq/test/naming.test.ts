import { describe, expect, it } from "vitest";
import {
  deadLetterQueueName,
  escapeName,
  resolveDestination,
  retryQueueName,
  topicSubscriptionQueue,
} from "../src/index.js";
import { rejects } from "./helpers.js";

const AMQP = /^[a-zA-Z0-9_\-.:]+$/;

/** True when `name` reads as an escaped user name: every ":" starts a "::" or ":." pair. */
function isEscapedUserName(name: string): boolean {
  for (let i = 0; i < name.length; i++) {
    if (name[i] !== ":") continue;
    if (name[i + 1] !== ":" && name[i + 1] !== ".") return false;
    i += 1;
  }
  return true;
}

describe("naming", () => {
  it("maps queues to durable queue names and topics to exchange names", () => {
    expect(resolveDestination("/queue/orders")).toEqual({
      kind: "queue",
      destination: "/queue/orders",
      queue: "orders",
    });
    expect(resolveDestination("/queue/019ce6d0-aa/scraping.tasks")).toMatchObject({
      queue: "019ce6d0-aa:.scraping.tasks",
    });
    expect(resolveDestination("/topic/config.reloaded")).toMatchObject({
      kind: "topic",
      exchange: "config.reloaded:x",
    });
  });

  it("is injective, including names that differ only in ':' and '/'", () => {
    const names = ["a/b", "a:.b", "a:/b", "a/:b", "a::b", "a:b", "a.b", "a/b/c", "a:.b/c", "a/b:.c", "ab"];
    const mapped = names.map(escapeName);
    expect(new Set(mapped).size).toBe(names.length);
    for (const m of mapped) expect(m).toMatch(AMQP);
  });

  it("keeps internal names out of the space of user names", () => {
    const user = new Set(["q", "q.dlq", "q:retry.100", "q/retry.100", "t:x", "t/sub.s"].map(escapeName));
    const internal = [
      retryQueueName("q", 100),
      topicSubscriptionQueue("/topic/t", "s"),
      deadLetterQueueName(topicSubscriptionQueue("/topic/t", "s"), "topic"),
      resolveDestination("/topic/t").kind === "topic" ? "t:x" : "",
    ];
    for (const name of internal) {
      expect(name).toMatch(AMQP);
      expect(isEscapedUserName(name), name).toBe(false);
      expect(user.has(name)).toBe(false);
    }
    for (const name of user) expect(isEscapedUserName(name), name).toBe(true);
  });

  it("names the dead-letter queue of /queue/x as the queue of /queue/x.dlq", () => {
    const source = resolveDestination("/queue/jobs/in");
    const dlq = resolveDestination("/queue/jobs/in.dlq");
    if (source.kind !== "queue" || dlq.kind !== "queue") throw new Error("queues expected");
    expect(deadLetterQueueName(source.queue, "queue")).toBe(dlq.queue);
  });

  it("refuses invalid destinations with the reason", () => {
    for (const bad of [
      "plain",
      "/queue/",
      "/queue/a b",
      "/queue/a//b",
      "/topic/ünï",
      `/queue/${"x".repeat(201)}`,
    ]) {
      const error = rejects(() => resolveDestination(bad));
      expect(error.code).toBe("invalid_destination");
      expect(error.message).toContain(bad.slice(0, 40));
    }
  });

  it("refuses the amq. prefix RabbitMQ reserves, and names past 255 bytes", () => {
    expect(rejects(() => resolveDestination("/queue/amq.gen")).message).toContain('"amq."');
    const long = `/queue/${Array.from({ length: 60 }, () => "a:").join("/")}`.slice(0, 207);
    expect(rejects(() => resolveDestination(long)).message).toMatch(/255|200/);
  });

  it("validates subscription names of topic queues", () => {
    expect(topicSubscriptionQueue("/topic/t", "web-scraper:019ce6d0")).toBe("t:sub.web-scraper::019ce6d0");
    expect(rejects(() => topicSubscriptionQueue("/topic/t", "has space")).code).toBe("invalid_destination");
  });
});
