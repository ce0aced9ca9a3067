import { probeTcp, runConformanceSuite } from "@factflow/infra-testkit";
import { createRabbitMqProvider, type RabbitMqProvider } from "../src/index.js";
import { deleteTopology, RABBITMQ_URL, storeDeadLetterAgain, urlVia } from "./helpers.js";

const broker = new URL(RABBITMQ_URL);
const host = broker.hostname;
const port = Number(broker.port || 5672);
const created: RabbitMqProvider[] = [];

runConformanceSuite({
  name: "rabbitmq",
  available: await probeTcp(host, port),
  createProvider: (override) => {
    const provider = createRabbitMqProvider({
      url: urlVia(override),
      heartbeatSeconds: 2,
      publishTimeoutMs: 10_000,
    });
    created.push(provider);
    return provider;
  },
  faults: { kind: "tcp", target: { host, port } },
  storeDeadLetterAgain,
  // Every queue, holding queue, dead-letter queue and exchange any provider of this run declared.
  cleanup: async () => {
    const queues = created.flatMap((p) => p.declaredNames().queues);
    const exchanges = created.flatMap((p) => p.declaredNames().exchanges);
    await deleteTopology({ queues, exchanges });
  },
});
