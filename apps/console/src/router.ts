import { useEffect, useState } from "preact/hooks";

/**
 * Hash routes (`#/executions/<id>`): the server serves one page at /ui/ and never sees the route,
 * so ids never reach its logs as paths.
 */
export interface Route {
  path: string[];
  params: URLSearchParams;
}

function current(): Route {
  const hash = location.hash.replace(/^#\/?/, "");
  const [path = "", search = ""] = hash.split("?");
  return {
    path: path
      .split("/")
      .filter((p) => p !== "")
      .map(decodeURIComponent),
    params: new URLSearchParams(search),
  };
}

export function useRoute(): Route {
  const [route, setRoute] = useState(current);
  useEffect(() => {
    const onChange = () => setRoute(current());
    addEventListener("hashchange", onChange);
    return () => removeEventListener("hashchange", onChange);
  }, []);
  return route;
}

/** A link target for a route: `href("executions", id)` → `#/executions/<id>`. */
export function href(...parts: string[]): string {
  return `#/${parts.map(encodeURIComponent).join("/")}`;
}

export function hrefWith(parts: string[], params: Record<string, string | number | undefined>): string {
  const search = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== "") search.set(k, String(v));
  const text = search.toString();
  return text === "" ? href(...parts) : `${href(...parts)}?${text}`;
}

export function navigate(target: string): void {
  location.hash = target.replace(/^#/, "");
}
