import { type Logger, silentLogger } from "@factflow/protocols";

/** The logger of provider `name`: the caller's (silent when none), with `provider: name` on every line. */
export function providerLogger(name: string, logger: Logger | undefined): Logger {
  return (logger ?? silentLogger).child({ provider: name });
}
