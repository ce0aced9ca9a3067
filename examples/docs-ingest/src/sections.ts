import { readFile } from "node:fs/promises";
import type { AdapterDefinition, JsonObject } from "@factflow/protocols";
import { enrichText, splitSections, stableHash } from "./markdown.js";

/** `markdown_split`: reads one file and fans out one message per heading section. */
export const split: AdapterDefinition = {
  type: "markdown_split",
  description: "Splits one Markdown file into heading sections (fan-out)",
  create() {
    return {
      type: "markdown_split",
      async process(ctx) {
        const { path, name } = ctx.message as { path: string; name: string };
        const sections = splitSections(await readFile(path, "utf8"));
        return {
          data: null,
          emitMessages: sections.map((s) => ({
            body: {
              id: `${name}#${s.index}`,
              file: name,
              index: s.index,
              heading: s.heading,
              level: s.level,
              trail: [...s.trail],
              text: s.text,
            },
          })),
        };
      },
    };
  },
};

/**
 * `flaky_step`: fails some sections on purpose, deterministically by a hash of the section id, to
 * show retries and dead letters: every `fail_once_every`-th fails its first attempt only, every
 * `always_fail_every`-th fails every attempt and ends in the dead-letter queue.
 */
export const flaky: AdapterDefinition = {
  type: "flaky_step",
  description: "Passes sections through, failing some transiently (deterministic) to show retries and DLQ",
  create(config) {
    const onceEvery = typeof config.fail_once_every === "number" ? config.fail_once_every : 4;
    const alwaysEvery = typeof config.always_fail_every === "number" ? config.always_fail_every : 13;
    return {
      type: "flaky_step",
      process(ctx) {
        const id = String((ctx.message as JsonObject).id);
        const hash = stableHash(id);
        if (hash % alwaysEvery === 0) {
          return {
            data: null,
            error: `simulated outage for section ${id} (fails on every attempt)`,
            retryable: true,
          };
        }
        if (hash % onceEvery === 0 && ctx.attempt === 1) {
          return {
            data: null,
            error: `simulated timeout for section ${id} (succeeds on retry)`,
            retryable: true,
          };
        }
        return { data: ctx.message };
      },
    };
  },
};

/** `section_enrich`: word count, reading time, code blocks, links and keywords of a section. */
export const enrich: AdapterDefinition = {
  type: "section_enrich",
  description: "Adds word count, reading time, code block and link counts and keywords to a section",
  create() {
    return {
      type: "section_enrich",
      process(ctx) {
        const section = ctx.message as JsonObject;
        return { data: { ...section, stats: enrichText(String(section.text ?? "")) } };
      },
    };
  },
};
