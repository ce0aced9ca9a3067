import { type CliContext, settingsOf } from "../context.js";
import { importModule } from "../module-importer.js";

/** `factflow serve [--host H] [--port P]`: runs the HTTP API until SIGINT/SIGTERM. */
export async function serveCommand(ctx: CliContext): Promise<number> {
  const settings = await settingsOf(ctx);
  const { startServer } = await import("@factflow/server");
  const server = await startServer(settings, { handleSignals: true, importModule });
  ctx.output.err(
    `factflow server listening on ${server.url} (provider ${settings.provider}); Ctrl-C stops it`,
  );
  await new Promise<never>(() => {});
  return 0;
}
