import type * as v from "valibot";

/**
 * Turns a schema issue into the sentence a config author reads. Valibot's text for a key a strict
 * object does not know ("Invalid key: Expected never but received …") names neither the key's
 * status nor the fix; the commonest case is an adapter setting written beside `type` instead of
 * under `config:`.
 */
export function configIssueText(issue: v.BaseIssue<unknown>): string {
  if (issue.kind !== "schema" || issue.expected !== "never") return issue.message;
  const key = String(issue.input);
  const path = issue.path ?? [];
  const parentKey = path.length >= 3 ? path[path.length - 3]?.key : undefined;
  if (parentKey === "adapters") {
    return `unknown key "${key}" on an adapter step (its keys are type, config, condition); adapter settings go under config, for example: { type: …, config: { ${key}: … } }`;
  }
  return `unknown key "${key}"; check its spelling and nesting against "Write a pipeline" in docs/guide.md`;
}
