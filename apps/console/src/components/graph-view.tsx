import dagre from "@dagrejs/dagre";
import { useMemo } from "preact/hooks";

export interface GraphNode {
  id: string;
  label: string;
  /** A second, smaller line (counts, status). */
  detail?: string;
  /** CSS class for the box: `route`, `queue`, `ok`, `failed`, `pending`... */
  kind: string;
  href?: string;
  /** Box width in px. @default 170 */
  width?: number;
}

export interface GraphEdge {
  from: string;
  to: string;
  label?: string;
}

const NODE_WIDTH = 170;
const NODE_HEIGHT = 44;

/**
 * A directed graph laid out by dagre (ranked, left to right) and drawn as SVG. Used for the
 * pipeline (routes and queues) and for one message's lineage tree.
 */
export function GraphView(props: {
  nodes: GraphNode[];
  edges: GraphEdge[];
  testId: string;
  /** What the drawing shows, for screen readers. */
  label: string;
  direction?: "LR" | "TB";
  /** Scale the drawing down to the page's width instead of scrolling. */
  fit?: boolean;
}) {
  const layout = useMemo(() => {
    const g = new dagre.graphlib.Graph({ multigraph: true });
    g.setGraph({ rankdir: props.direction ?? "LR", nodesep: 18, ranksep: 36, marginx: 8, marginy: 8 });
    g.setDefaultEdgeLabel(() => ({}));
    for (const node of props.nodes)
      g.setNode(node.id, { width: node.width ?? NODE_WIDTH, height: NODE_HEIGHT });
    props.edges.forEach((edge, i) => {
      if (g.hasNode(edge.from) && g.hasNode(edge.to))
        g.setEdge(edge.from, edge.to, { label: edge.label ?? "", width: 40, height: 14 }, `e${i}`);
    });
    dagre.layout(g);
    const graph = g.graph();
    return {
      width: Math.max(graph.width ?? 0, 100),
      height: Math.max(graph.height ?? 0, 60),
      nodes: props.nodes.map((n) => ({ ...n, x: g.node(n.id)?.x ?? 0, y: g.node(n.id)?.y ?? 0 })),
      edges: g.edges().map((e) => {
        const data = g.edge(e) as {
          points?: { x: number; y: number }[];
          label?: string;
          x?: number;
          y?: number;
        };
        return {
          key: `${e.v}-${e.w}-${e.name ?? ""}`,
          points: data.points ?? [],
          label: data.label ?? "",
          x: data.x,
          y: data.y,
        };
      }),
    };
  }, [props.nodes, props.edges, props.direction]);

  return (
    <div class="graph" data-testid={props.testId}>
      <svg
        class={props.fit === true ? "fit" : undefined}
        width={layout.width}
        height={layout.height}
        viewBox={`0 0 ${layout.width} ${layout.height}`}
        role="img"
        aria-label={props.label}
      >
        <title>{props.label}</title>
        <defs>
          <marker
            id="arrow"
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
        {layout.edges.map((e) => (
          <g key={e.key} class="edge">
            <polyline points={e.points.map((p) => `${p.x},${p.y}`).join(" ")} marker-end="url(#arrow)" />
            {e.label !== "" && e.x !== undefined && e.y !== undefined ? (
              <text x={e.x} y={e.y + 4} text-anchor="middle" class="edge-label">
                {e.label}
              </text>
            ) : null}
          </g>
        ))}
        {layout.nodes.map((n) => {
          const width = n.width ?? NODE_WIDTH;
          // About 7 px per character at the label's size.
          const fits = Math.floor((width - 12) / 7);
          const box = (
            <g
              class={`node ${n.kind}`}
              data-node-id={n.id}
              transform={`translate(${n.x - width / 2},${n.y - NODE_HEIGHT / 2})`}
            >
              <rect width={width} height={NODE_HEIGHT} rx={6} />
              <text x={8} y={18} class="node-label">
                {n.label.length > fits ? `${n.label.slice(0, fits - 1)}…` : n.label}
              </text>
              {n.detail === undefined ? null : (
                <text x={8} y={35} class="node-detail">
                  {n.detail.length > fits + 4 ? `${n.detail.slice(0, fits + 3)}…` : n.detail}
                </text>
              )}
              <title>{`${n.label}${n.detail === undefined ? "" : `\n${n.detail}`}`}</title>
            </g>
          );
          return n.href === undefined ? (
            box
          ) : (
            <a key={n.id} href={n.href}>
              {box}
            </a>
          );
        })}
      </svg>
    </div>
  );
}
