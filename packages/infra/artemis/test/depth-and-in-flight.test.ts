import { describe, expect, it } from "vitest";
import { depthAndInFlight } from "../src/admin.js";

// The stranded state cannot be produced on demand (a race in Artemis 2.40 when a consumer's
// connection dies under load), so the arithmetic is checked here with the figures a stuck cluster
// run read from the broker: messageCount 1, deliveringCount 1, no consumer holding anything
// (listDeliveringMessages [], every consumer's messagesInTransit 0), never redelivered.
describe("depthAndInFlight", () => {
  it("counts a delivery no live consumer holds as neither waiting nor in flight", () => {
    expect(depthAndInFlight({ messageCount: 1, deliveringCount: 1, heldCount: 0 }, 0)).toEqual({
      depth: 0,
      inFlight: 0,
    });
    // Stranded next to real work: only the real work counts.
    expect(depthAndInFlight({ messageCount: 4, deliveringCount: 2, heldCount: 1 }, 0)).toEqual({
      depth: 2,
      inFlight: 1,
    });
  });

  it("reports held deliveries as in flight, and the ones no handler has started as waiting", () => {
    expect(depthAndInFlight({ messageCount: 5, deliveringCount: 3, heldCount: 3 }, 0)).toEqual({
      depth: 2,
      inFlight: 3,
    });
    // Two of the three sit in this provider's buffer: waiting as far as Factflow is concerned.
    expect(depthAndInFlight({ messageCount: 5, deliveringCount: 3, heldCount: 3 }, 2)).toEqual({
      depth: 4,
      inFlight: 1,
    });
  });

  it("never goes negative when the figures were read at slightly different moments", () => {
    // Consumers read after more deliveries went out than the queue row counted.
    expect(depthAndInFlight({ messageCount: 2, deliveringCount: 1, heldCount: 3 }, 0)).toEqual({
      depth: 1,
      inFlight: 1,
    });
    expect(depthAndInFlight({ messageCount: 0, deliveringCount: 0, heldCount: 0 }, 4)).toEqual({
      depth: 0,
      inFlight: 0,
    });
  });
});
