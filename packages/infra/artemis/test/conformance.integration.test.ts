import { runConformanceSuite } from "@factflow/infra-testkit";
import { type ArtemisProvider, createArtemisProvider } from "../src/index.js";
import { ARTEMIS_HOST, ARTEMIS_PORT, artemisAvailability, storeDeadLetterAgain, urlVia } from "./helpers.js";

const available = await artemisAvailability();

runConformanceSuite({
  name: "artemis",
  available,
  createProvider: (override) =>
    createArtemisProvider({ url: urlVia(override), heartbeatMs: 2_000, receiptTimeoutMs: 10_000 }),
  faults: { kind: "tcp", target: { host: ARTEMIS_HOST, port: ARTEMIS_PORT } },
  storeDeadLetterAgain,
  cleanup: async (destinations) => {
    const provider: ArtemisProvider = createArtemisProvider({ url: urlVia() });
    await provider.connect();
    try {
      for (const destination of destinations) await provider.destroy(destination).catch(() => {});
    } finally {
      await provider.close();
    }
  },
});
