import { probeTcp, runConformanceSuite } from "@factflow/infra-testkit";
import { createRedisProvider } from "../src/index.js";
import { deleteKeysWithPrefix, REDIS_HOST, REDIS_PORT, testPrefix, urlVia } from "./helpers.js";

const keyPrefix = testPrefix();

runConformanceSuite({
  name: "redis",
  available: await probeTcp(REDIS_HOST, REDIS_PORT),
  createProvider: (override) =>
    createRedisProvider({
      url: urlVia(override),
      keyPrefix,
      commandTimeoutMs: 5_000,
      visibilityTimeoutMs: 10_000,
    }),
  faults: { kind: "tcp", target: { host: REDIS_HOST, port: REDIS_PORT } },
  // Every key of this run shares its prefix; nothing else in the database is touched.
  cleanup: async () => {
    await deleteKeysWithPrefix(keyPrefix);
  },
});
