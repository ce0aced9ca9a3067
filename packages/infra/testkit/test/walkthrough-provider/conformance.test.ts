import { runConformanceSuite } from "../../src/index.js";
import { WalkthroughBroker } from "./broker.js";
import { createWalkthroughProvider } from "./provider.js";

// One broker for every provider the suite builds: a restarted provider finds what the crashed one left.
const broker = new WalkthroughBroker();

runConformanceSuite({
  name: "walkthrough",
  expectations: {
    statsLagMs: 0,
    retryDelaySlackMs: 400,
    redeliveryWithinMs: 5_000,
    recoveryWithinMs: 20_000,
    note: "in-process broker: stats are exact at once, delays are local timers",
  },
  available: { ok: true },
  createProvider: () => createWalkthroughProvider(broker),
  faults: { kind: "restart" },
});
