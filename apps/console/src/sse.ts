import { authHeaders } from "./api.ts";

export interface ServerEvent {
  id: string;
  event: string;
  data: unknown;
}

/**
 * Follows `GET /api/v1/executions/{id}/events`. EventSource cannot send headers, so this reads the
 * stream with `fetch` (the token travels as a header) and reconnects with `Last-Event-ID` until
 * the server ends the stream after the final event. Returns a function that stops it.
 */
export function followEvents(executionId: string, onEvent: (event: ServerEvent) => void): () => void {
  const abort = new AbortController();
  let lastId = "";
  let ended = false;
  const run = async () => {
    for (let attempt = 0; !abort.signal.aborted && !ended && attempt < 20; attempt++) {
      try {
        const headers: Record<string, string> = { accept: "text/event-stream", ...authHeaders() };
        if (lastId !== "") headers["last-event-id"] = lastId;
        const response = await fetch(`/api/v1/executions/${encodeURIComponent(executionId)}/events`, {
          headers,
          signal: abort.signal,
        });
        if (!response.ok || response.body === null) return;
        const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
        let buffer = "";
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buffer += value;
          let cut = buffer.indexOf("\n\n");
          while (cut !== -1) {
            const event = parseBlock(buffer.slice(0, cut));
            buffer = buffer.slice(cut + 2);
            cut = buffer.indexOf("\n\n");
            if (event === undefined) continue;
            lastId = event.id;
            if (["completed", "failed", "cancelled"].includes(event.event)) ended = true;
            onEvent(event);
          }
        }
        if (ended) return;
      } catch {
        if (abort.signal.aborted) return;
      }
      await new Promise((resolve) => setTimeout(resolve, 1000));
    }
  };
  void run();
  return () => abort.abort();
}

function parseBlock(block: string): ServerEvent | undefined {
  const fields: Record<string, string> = {};
  for (const line of block.split("\n")) {
    if (line === "" || line.startsWith(":")) continue;
    const colon = line.indexOf(":");
    const key = colon === -1 ? line : line.slice(0, colon);
    const value = colon === -1 ? "" : line.slice(colon + 1).replace(/^ /, "");
    fields[key] = fields[key] === undefined ? value : `${fields[key]}\n${value}`;
  }
  if (fields.data === undefined) return undefined;
  let data: unknown = fields.data;
  try {
    data = JSON.parse(fields.data);
  } catch {}
  return { id: fields.id ?? "", event: fields.event ?? "message", data };
}
