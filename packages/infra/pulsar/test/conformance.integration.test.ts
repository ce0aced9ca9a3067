import { runConformanceSuite } from "@factflow/infra-testkit";
import { createPulsarProvider, type PulsarProvider } from "../src/index.js";
import { PULSAR_HOST, PULSAR_PORT, pulsarAvailability, storeDeadLetterAgain, urlVia } from "./helpers.js";

const available = await pulsarAvailability();

runConformanceSuite({
  name: "pulsar",
  available,
  createProvider: (override) =>
    createPulsarProvider({ url: urlVia(override), pingIntervalMs: 2_000, publishTimeoutMs: 10_000 }),
  faults: { kind: "tcp", target: { host: PULSAR_HOST, port: PULSAR_PORT } },
  storeDeadLetterAgain,
  // Every topic the run used (dead-letter and retry topics included).
  cleanup: async (destinations) => {
    const provider: PulsarProvider = createPulsarProvider({ url: urlVia() });
    await provider.connect();
    try {
      for (const destination of destinations) await provider.destroy(destination).catch(() => {});
    } finally {
      await provider.close();
    }
  },
});
