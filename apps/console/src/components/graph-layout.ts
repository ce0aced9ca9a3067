import dagre from "@dagrejs/dagre";

export interface GraphNode {
  id: string;
  label: string;
  /** A second, smaller line (counts, status). */
  detail?: string;
  /** CSS class for the box: `route`, `queue`, `ok`, `failed`, `pending`... */
  kind: string;
  href?: string;
  /** Box width in px. @default wide enough for its label and detail, up to 340 */
  width?: number;
}

export interface GraphEdge {
  from: string;
  to: string;
  label?: string;
}

export const NODE_HEIGHT = 44;
const MIN_WIDTH = 100;
const MAX_WIDTH = 340;
/** Average advance of the label (12 px, bold) and detail (11 px) fonts, per character. */
const LABEL_CHAR = 7.4;
const DETAIL_CHAR = 6.4;

/** Wide enough for the whole label and detail, so nothing is cut short below MAX_WIDTH. */
export function nodeWidth(node: GraphNode): number {
  if (node.width !== undefined) return node.width;
  const text = Math.max(node.label.length * LABEL_CHAR, (node.detail?.length ?? 0) * DETAIL_CHAR);
  return Math.min(MAX_WIDTH, Math.max(MIN_WIDTH, Math.ceil(text + 18)));
}

/** A text cut to what fits in `width` at `perChar` px a character, with an ellipsis when cut. */
export function fitText(text: string, width: number, perChar: number): string {
  const fits = Math.floor((width - 16) / perChar);
  return text.length > fits ? `${text.slice(0, Math.max(1, fits - 1))}…` : text;
}

export interface LaidOutNode extends GraphNode {
  x: number;
  y: number;
  w: number;
}

export interface LaidOutEdge {
  key: string;
  points: { x: number; y: number }[];
  label: string;
  x: number | undefined;
  y: number | undefined;
}

export interface GraphLayout {
  direction: "LR" | "TB";
  width: number;
  height: number;
  nodes: LaidOutNode[];
  edges: LaidOutEdge[];
}

/** Ranked layout (dagre), left to right or top to bottom; coordinates are node centres. */
export function layoutGraph(nodes: GraphNode[], edges: GraphEdge[], direction: "LR" | "TB"): GraphLayout {
  const g = new dagre.graphlib.Graph({ multigraph: true });
  g.setGraph({
    rankdir: direction,
    nodesep: 18,
    ranksep: direction === "TB" ? 30 : 40,
    marginx: 8,
    marginy: 8,
  });
  g.setDefaultEdgeLabel(() => ({}));
  for (const node of nodes) g.setNode(node.id, { width: nodeWidth(node), height: NODE_HEIGHT });
  edges.forEach((edge, i) => {
    if (g.hasNode(edge.from) && g.hasNode(edge.to))
      g.setEdge(
        edge.from,
        edge.to,
        // A label needs room along the rank axis only left to right; top to bottom it sits beside its edge.
        {
          label: edge.label ?? "",
          width: Math.max(24, (edge.label ?? "").length * 6.6 + 8),
          height: direction === "TB" ? 0 : 14,
        },
        `e${i}`,
      );
  });
  dagre.layout(g);
  const graph = g.graph();
  return {
    direction,
    width: Math.max(graph.width ?? 0, 100),
    height: Math.max(graph.height ?? 0, 60),
    nodes: nodes.map((n) => ({ ...n, x: g.node(n.id)?.x ?? 0, y: g.node(n.id)?.y ?? 0, w: nodeWidth(n) })),
    edges: g.edges().map((e) => {
      const data = g.edge(e) as {
        points?: { x: number; y: number }[];
        label?: string;
        x?: number;
        y?: number;
      };
      const points = data.points ?? [];
      // A label without height gets no position from dagre: it goes at the edge's middle point.
      const middle = points[Math.floor(points.length / 2)];
      return {
        key: `${e.v}-${e.w}-${e.name ?? ""}`,
        points,
        label: data.label ?? "",
        x: data.x ?? middle?.x,
        y: data.y ?? middle?.y,
      };
    }),
  };
}
