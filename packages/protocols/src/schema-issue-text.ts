import type * as v from "valibot";

/**
 * Turns a schema issue into the sentence its reader acts on. Valibot's text for a key that a strict
 * object does not know ("Invalid key: Expected never but received …") and for a required key that
 * is missing ("Invalid key: Expected \"x\" but received undefined") names neither what is wrong nor
 * the fix. `hint` is appended to an unknown-key sentence (where to look up the known keys).
 */
export function schemaIssueText(issue: v.BaseIssue<unknown>, hint?: string): string {
  if (issue.kind !== "schema") return issue.message;
  if (issue.expected === "never") {
    const key = String(issue.input);
    const path = issue.path ?? [];
    const parentKey = path.length >= 3 ? path[path.length - 3]?.key : undefined;
    if (parentKey === "adapters") {
      return `unknown key "${key}" on an adapter step (its keys are type, config, condition); adapter settings go under config, for example: { type: …, config: { ${key}: … } }`;
    }
    return hint === undefined ? `unknown key "${key}"` : `unknown key "${key}"; ${hint}`;
  }
  const last = issue.path?.at(-1);
  if (issue.input === undefined && last !== undefined && issue.expected === `"${String(last.key)}"`) {
    return "is required";
  }
  return issue.message;
}
