import type { Plugin } from "esbuild";

/** See keep-locations.mjs. */
export function keepLocations(
  isBundled: (path: string, args: { path: string; importer: string }) => boolean,
): Plugin;
export function withOwnLocation(source: string, path: string): string;
