import { existsSync, readFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";

export {
  checkServices,
  createDatabase,
  DATABASE_URL,
  RABBITMQ_URL,
  rabbitQueues,
} from "../../../crash/test/harness/services.js";

/** Where `scripts/services/artemis.sh` records the URL its broker answers on. */
function recordedArtemisUrl(): string | undefined {
  const base = process.env.FACTFLOW_SERVICES_DIR ?? join(homedir(), ".cache", "factflow", "services");
  const file = join(base, "artemis", "stomp.url");
  return existsSync(file) ? readFileSync(file, "utf8").trim() || undefined : undefined;
}

/** The Artemis STOMP URL: `ARTEMIS_STOMP_URL`, else what the service script recorded. */
export const ARTEMIS_URL = process.env.ARTEMIS_STOMP_URL ?? recordedArtemisUrl() ?? "stomp://127.0.0.1:61613";
