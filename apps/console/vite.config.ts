import { defineConfig } from "vite";

/**
 * The console is built into `dist/` and served by the server under `/ui/`, so every asset URL is
 * relative to that base. No CDN: everything the page loads comes from the same origin.
 */
export default defineConfig({
  base: "/ui/",
  oxc: { jsx: { runtime: "automatic", importSource: "preact" } },
  build: {
    outDir: "dist",
    emptyOutDir: true,
    sourcemap: false,
    // The layout library is the largest part; one chunk keeps the page to three requests.
    chunkSizeWarningLimit: 1024,
  },
});
