import type { Logger } from "@factflow/protocols";

const LEVELS = { debug: 10, info: 20, warn: 30, error: 40 } as const;
export type LogLevel = keyof typeof LEVELS;

/** A logger writing one JSON object per line to stderr. Fields must never hold secrets. */
export function createJsonLogger(level: LogLevel = "info", base: Record<string, unknown> = {}): Logger {
  const write = (at: LogLevel, message: string, fields?: Record<string, unknown>) => {
    if (LEVELS[at] < LEVELS[level]) return;
    process.stderr.write(
      `${JSON.stringify({ time: new Date().toISOString(), level: at, message, ...base, ...fields })}\n`,
    );
  };
  return {
    debug: (m, f) => write("debug", m, f),
    info: (m, f) => write("info", m, f),
    warn: (m, f) => write("warn", m, f),
    error: (m, f) => write("error", m, f),
    child: (fields) => createJsonLogger(level, { ...base, ...fields }),
  };
}
