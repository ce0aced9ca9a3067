import { describe, expect, it } from "vitest";
import {
  consumedQueueName,
  deadLetterQueueName,
  resolveDestination,
  subscribeDestination,
} from "../src/index.js";

describe("naming", () => {
  it("maps queues to anycast addresses with <queue>.dlq", () => {
    const target = resolveDestination("/queue/019ce6d0/scraping.tasks");
    expect(target).toEqual({
      kind: "queue",
      destination: "/queue/019ce6d0/scraping.tasks",
      address: "019ce6d0/scraping.tasks",
    });
    expect(subscribeDestination(target, "web-scraper:019ce6d0")).toBe("019ce6d0/scraping.tasks");
    expect(consumedQueueName(target, "any")).toBe("019ce6d0/scraping.tasks");
    expect(deadLetterQueueName(target)).toBe("019ce6d0/scraping.tasks.dlq");
  });

  it("maps a topic subscription to its own multicast queue, addressed by FQQN", () => {
    const target = resolveDestination("/topic/config.reloaded");
    expect(subscribeDestination(target, "audit")).toBe("config.reloaded::config.reloaded@audit");
    expect(deadLetterQueueName(target, "audit")).toBe("config.reloaded@audit.dlq");
    expect(() => deadLetterQueueName(target)).toThrow(/per subscription/);
  });

  it("refuses names Artemis would misread, saying why", () => {
    expect(() => resolveDestination("/queue/a::b")).toThrow(/"::"/);
    expect(() => resolveDestination("orders")).toThrow(/must start with/);
  });
});
