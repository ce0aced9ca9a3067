// biome-ignore-all lint/a11y/noNoninteractiveTabindex: scrolled text blocks take the keyboard so they can be scrolled without a mouse.
import { useState } from "preact/hooks";

/** Characters of JSON shown before "show all". */
const SHOWN = 20_000;
/** Above this many characters the page does not render the text at all: copy or download it. */
const RENDERABLE = 1_000_000;

function bytes(n: number): string {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KB`;
  return `${(n / 1024 / 1024).toFixed(1)} MB`;
}

/** Copies `text`; says whether it worked next to the button. */
export function CopyButton(props: { text: string; label?: string; testId?: string }) {
  const [state, setState] = useState<"idle" | "copied" | "failed">("idle");
  async function copy() {
    try {
      await navigator.clipboard.writeText(props.text);
      setState("copied");
    } catch {
      setState("failed");
    }
    setTimeout(() => setState("idle"), 2000);
  }
  return (
    <>
      <button type="button" data-testid={props.testId ?? "copy"} onClick={copy}>
        {props.label ?? "copy"}
      </button>
      <span class="muted copy-state" role="status">
        {state === "copied" ? " copied" : state === "failed" ? " copy failed: the browser refused" : ""}
      </span>
    </>
  );
}

/**
 * A JSON value shown pretty-printed: its size, the first 20,000 characters with "show all" (up to a
 * million), and copy and download of the whole text, so a large payload never freezes the page.
 */
export function Payload(props: { value: unknown; name: string; testId?: string }) {
  const text = JSON.stringify(props.value, null, 2) ?? "null";
  return (
    <TextPayload
      text={text}
      name={props.name}
      type="application/json"
      {...(props.testId === undefined ? {} : { testId: props.testId })}
    />
  );
}

/** Any text (a JSON body, a stack trace) with its size, the same cut, "show all", copy and download. */
export function TextPayload(props: { text: string; name: string; type?: string; testId?: string }) {
  const { text } = props;
  const type = props.type ?? "text/plain";
  const size = new TextEncoder().encode(text).length;
  const [all, setAll] = useState(false);
  const cut = text.length > SHOWN && !all;
  const renderable = text.length <= RENDERABLE;
  function download() {
    const url = URL.createObjectURL(new Blob([text], { type }));
    const link = document.createElement("a");
    link.href = url;
    link.download = `${props.name}.${type === "application/json" ? "json" : "txt"}`;
    link.click();
    setTimeout(() => URL.revokeObjectURL(url), 1000);
  }
  return (
    <div class="payload" data-testid={props.testId} data-size={size} data-cut={String(cut || !renderable)}>
      <div class="payload-tools">
        <span class="muted">{bytes(size)}</span> <CopyButton text={text} testId="copy-payload" />{" "}
        <button type="button" onClick={download}>
          download
        </button>
      </div>
      {renderable ? (
        // A scrolled block must take the keyboard (axe: scrollable-region-focusable).
        <pre class="body" tabIndex={0}>
          {cut ? text.slice(0, SHOWN) : text}
        </pre>
      ) : (
        <p class="muted">Too large to show here ({bytes(size)}): copy or download it.</p>
      )}
      {cut && renderable ? (
        <p class="muted">
          showing {SHOWN.toLocaleString()} of {text.length.toLocaleString()} characters{" "}
          <button type="button" data-testid="show-all" onClick={() => setAll(true)}>
            show all
          </button>
        </p>
      ) : null}
    </div>
  );
}
