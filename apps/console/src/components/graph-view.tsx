// biome-ignore-all lint/a11y/noNoninteractiveTabindex: the drawing's box takes the keys that pan and zoom it.
// biome-ignore-all lint/a11y/useSemanticElements: a group of drawn nodes, not a form's fieldset.
import { useLayoutEffect, useMemo, useRef, useState } from "preact/hooks";
import {
  fitText,
  type GraphEdge,
  type GraphNode,
  type LaidOutNode,
  layoutGraph,
  NODE_HEIGHT,
} from "./graph-layout.ts";
import { initialView, MIN_READABLE_SCALE, usePanZoom, wholeView } from "./pan-zoom.ts";

export type { GraphEdge, GraphNode } from "./graph-layout.ts";

/** Tallest a drawing's box grows before the drawing pans inside it instead. */
const MAX_BOX_HEIGHT = 560;
/** A top-to-bottom drawing chosen because left-to-right was too wide may use more height. */
const MAX_BOX_HEIGHT_TB = 720;
const MIN_BOX_HEIGHT = 110;

/**
 * A directed graph laid out by dagre and drawn as SVG in a box that pans (drag, arrow keys) and
 * zooms (wheel, + and −, the buttons). The first view is as large as fits and never smaller than
 * readable; a drawing larger than that starts on `focus` (a node id) or on its start. Used for the
 * pipeline (routes and queues) and for one message's lineage tree.
 */
export function GraphView(props: {
  nodes: GraphNode[];
  edges: GraphEdge[];
  testId: string;
  /** What the drawing shows, for screen readers. */
  label: string;
  /** `auto`: left to right when that is readable at the box's width, else top to bottom. @default "LR" */
  direction?: "LR" | "TB" | "auto";
  /** The node to start on (and return to with "focus"). */
  focus?: string;
}) {
  const wrapRef = useRef<HTMLDivElement>(null);
  const [wrapWidth, setWrapWidth] = useState<number | undefined>();
  useLayoutEffect(() => {
    const measure = () => setWrapWidth(wrapRef.current?.clientWidth);
    measure();
    addEventListener("resize", measure);
    return () => removeEventListener("resize", measure);
  }, []);
  const wanted = props.direction ?? "LR";
  const layout = useMemo(() => {
    const lr = layoutGraph(props.nodes, props.edges, wanted === "TB" ? "TB" : "LR");
    if (wanted !== "auto" || wrapWidth === undefined || lr.width * MIN_READABLE_SCALE <= wrapWidth - 24)
      return lr;
    return layoutGraph(props.nodes, props.edges, "TB");
  }, [props.nodes, props.edges, wanted, wrapWidth]);
  const focusNode = layout.nodes.find((n) => n.id === props.focus);
  // Tall enough for the drawing at a readable scale, within bounds; the width is the page's.
  const maxHeight = wanted === "auto" && layout.direction === "TB" ? MAX_BOX_HEIGHT_TB : MAX_BOX_HEIGHT;
  const widthScale = Math.max(
    MIN_READABLE_SCALE,
    Math.min(1, ((wrapWidth ?? layout.width) - 24) / layout.width),
  );
  const boxHeight = Math.round(
    Math.min(maxHeight, Math.max(MIN_BOX_HEIGHT, layout.height * widthScale + 24)),
  );
  const size = { width: layout.width, height: layout.height };
  // A new subject (another message, other nodes) starts over; live counts changing keep the view.
  const resetKey = `${props.focus ?? ""}:${props.nodes.length}:${props.nodes[0]?.id}:${props.nodes.at(-1)?.id}:${layout.direction}:${boxHeight}`;
  const pz = usePanZoom((box) => initialView(size, box, focusNode), resetKey);
  const interactive = layout.nodes.some((n) => n.href !== undefined);

  return (
    <div class="graph-wrap" ref={wrapRef}>
      <div class="graph-tools">
        <button type="button" data-testid="zoom-in" aria-label="zoom in" onClick={() => pz.zoom(1.25)}>
          +
        </button>
        <button type="button" data-testid="zoom-out" aria-label="zoom out" onClick={() => pz.zoom(0.8)}>
          −
        </button>
        <button
          type="button"
          data-testid="zoom-whole"
          onClick={() => pz.setView(wholeView(size, pz.boxSize()))}
        >
          whole graph
        </button>
        <button type="button" data-testid="zoom-reset" onClick={pz.reset}>
          {focusNode === undefined ? "reset" : "back to the focused node"}
        </button>
        <span class="muted">drag to pan · wheel or + − to zoom · 0 resets</span>
      </div>
      <div
        class="graph"
        data-testid={props.testId}
        data-scale={pz.view.k.toFixed(3)}
        data-direction={layout.direction}
        ref={pz.boxRef}
        style={{ height: `${boxHeight}px` }}
        tabIndex={0}
        role="group"
        aria-label={`${props.label}; arrow keys pan, + and − zoom, 0 resets`}
        {...pz.handlers}
      >
        <svg width="100%" height="100%" {...(interactive ? {} : { role: "img", "aria-label": props.label })}>
          <title>{props.label}</title>
          <defs>
            <marker
              id={`arrow-${props.testId}`}
              viewBox="0 0 10 10"
              refX="9"
              refY="5"
              markerWidth="7"
              markerHeight="7"
              orient="auto-start-reverse"
            >
              <path d="M 0 0 L 10 5 L 0 10 z" class="arrow" />
            </marker>
          </defs>
          <g class="viewport" transform={`translate(${pz.view.x},${pz.view.y}) scale(${pz.view.k})`}>
            {layout.edges.map((e) => (
              <g key={e.key} class="edge">
                <polyline
                  points={e.points.map((p) => `${p.x},${p.y}`).join(" ")}
                  marker-end={`url(#arrow-${props.testId})`}
                />
                {e.label !== "" && e.x !== undefined && e.y !== undefined ? (
                  layout.direction === "TB" ? (
                    <text x={e.x + 8} y={e.y + 4} class="edge-label">
                      {e.label}
                    </text>
                  ) : (
                    <text x={e.x} y={e.y + 4} text-anchor="middle" class="edge-label">
                      {e.label}
                    </text>
                  )
                ) : null}
              </g>
            ))}
            {layout.nodes.map((n) => (
              <NodeBox key={n.id} node={n} />
            ))}
          </g>
        </svg>
      </div>
    </div>
  );
}

function NodeBox(props: { node: LaidOutNode }) {
  const n = props.node;
  const box = (
    <g
      class={`node ${n.kind}`}
      data-node-id={n.id}
      transform={`translate(${n.x - n.w / 2},${n.y - NODE_HEIGHT / 2})`}
    >
      <rect width={n.w} height={NODE_HEIGHT} rx={6} />
      <text x={8} y={18} class="node-label">
        {fitText(n.label, n.w, 7.4)}
      </text>
      {n.detail === undefined ? null : (
        <text x={8} y={35} class="node-detail">
          {fitText(n.detail, n.w, 6.4)}
        </text>
      )}
      <title>{`${n.label}${n.detail === undefined ? "" : `\n${n.detail}`}`}</title>
    </g>
  );
  if (n.href === undefined) return box;
  return (
    <a href={n.href} aria-label={`${n.label}${n.detail === undefined ? "" : `, ${n.detail}`}`}>
      {box}
    </a>
  );
}
