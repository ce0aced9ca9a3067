/** One `#`-heading section of a Markdown file. */
export interface Section {
  /** 0-based position in its file. */
  readonly index: number;
  /** Heading text, or `(preamble)` for text before the first heading. */
  readonly heading: string;
  /** Heading level 1–6 (0 for the preamble). */
  readonly level: number;
  /** Headings above this one, outermost first. */
  readonly trail: readonly string[];
  readonly text: string;
}

const HEADING = /^(#{1,6})\s+(.+?)\s*#*\s*$/;

/** Splits Markdown into sections at headings, ignoring `#` lines inside fenced code blocks. */
export function splitSections(markdown: string): Section[] {
  const sections: Section[] = [];
  const stack: { level: number; heading: string }[] = [];
  let current: { heading: string; level: number; trail: string[]; lines: string[] } = {
    heading: "(preamble)",
    level: 0,
    trail: [],
    lines: [],
  };
  let inFence = false;
  const close = () => {
    const text = current.lines.join("\n").trim();
    if (text !== "" || current.level > 0) {
      sections.push({
        index: sections.length,
        heading: current.heading,
        level: current.level,
        trail: current.trail,
        text,
      });
    }
  };
  for (const line of markdown.split(/\r?\n/)) {
    if (/^\s*(```|~~~)/.test(line)) inFence = !inFence;
    const match = inFence ? null : HEADING.exec(line);
    if (match === null) {
      current.lines.push(line);
      continue;
    }
    close();
    const level = match[1]?.length ?? 1;
    const heading = match[2] ?? "";
    while (stack.length > 0 && (stack[stack.length - 1]?.level ?? 0) >= level) stack.pop();
    current = { heading, level, trail: stack.map((s) => s.heading), lines: [] };
    stack.push({ level, heading });
  }
  close();
  return sections;
}

const STOPWORDS = new Set(
  (
    "a an and are as at be by can do does for from has have how if in into is it its not of on or so that the " +
    "their then there these this to was we what when which while who will with you your each every one more " +
    "than only also use used uses using they them our may must should would could its it's no yes all any"
  ).split(" "),
);

/** Counts and keywords of one section's text. */
export function enrichText(text: string) {
  const words = text.match(/[A-Za-z][A-Za-z0-9_'-]*/g) ?? [];
  const frequency = new Map<string, number>();
  for (const raw of words) {
    const word = raw.toLowerCase();
    if (word.length < 3 || STOPWORDS.has(word)) continue;
    frequency.set(word, (frequency.get(word) ?? 0) + 1);
  }
  const keywords = [...frequency]
    .sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]))
    .slice(0, 5)
    .map(([word]) => word);
  return {
    words: words.length,
    characters: text.length,
    code_blocks: Math.floor((text.match(/^\s*(```|~~~)/gm) ?? []).length / 2),
    links: (text.match(/\[[^\]]*\]\([^)]*\)/g) ?? []).length,
    reading_seconds: Math.ceil((words.length / 230) * 60),
    keywords,
  };
}

/** A small stable hash (FNV-1a) used to pick which sections the flaky step fails. */
export function stableHash(text: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash;
}
