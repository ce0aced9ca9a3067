import { useCallback, useEffect, useLayoutEffect, useRef, useState } from "preact/hooks";

/** A view of a drawing: translate by (x, y), then scale by k. */
export interface View {
  k: number;
  x: number;
  y: number;
}

/** Below this scale the 11–12 px labels stop being readable: the first view never goes lower. */
export const MIN_READABLE_SCALE = 0.8;
const MIN_SCALE = 0.05;
const MAX_SCALE = 3;
const PAD = 12;

/**
 * The first view of a `width` × `height` drawing in a `boxW` × `boxH` box: as large as fits, never
 * larger than life nor smaller than readable; centred where it fits, otherwise on `focus` (a point
 * of the drawing) or, without one, on its start (left edge, vertically centred).
 */
export function initialView(
  size: { width: number; height: number },
  box: { width: number; height: number },
  focus?: { x: number; y: number },
): View {
  const fit = Math.min(1, (box.width - 2 * PAD) / size.width, (box.height - 2 * PAD) / size.height);
  const k = Math.max(MIN_READABLE_SCALE, fit);
  const axis = (length: number, boxLength: number, at: number | undefined, start: number) => {
    if (length * k <= boxLength - 2 * PAD) return (boxLength - length * k) / 2;
    const wanted = at === undefined ? start : boxLength / 2 - at * k;
    // Keep the drawing's edges from leaving empty space inside the box.
    return Math.min(PAD, Math.max(boxLength - PAD - length * k, wanted));
  };
  return {
    k,
    x: axis(size.width, box.width, focus?.x, PAD),
    y: axis(size.height, box.height, focus?.y, box.height / 2 - (size.height * k) / 2),
  };
}

/** The whole drawing in the box, however small that makes it. */
export function wholeView(
  size: { width: number; height: number },
  box: { width: number; height: number },
): View {
  const k = Math.max(
    MIN_SCALE,
    Math.min(1, (box.width - 2 * PAD) / size.width, (box.height - 2 * PAD) / size.height),
  );
  return { k, x: (box.width - size.width * k) / 2, y: (box.height - size.height * k) / 2 };
}

/** `view` zoomed by `factor` around the box point (px, py). */
export function zoomAt(view: View, factor: number, px: number, py: number): View {
  const k = Math.min(MAX_SCALE, Math.max(MIN_SCALE, view.k * factor));
  const ratio = k / view.k;
  return { k, x: px - (px - view.x) * ratio, y: py - (py - view.y) * ratio };
}

/**
 * Pan (drag, arrow keys), zoom (wheel, + and −) and reset (0) for a box holding a drawing.
 * `reset()` returns to the first view; a drag that moved swallows the click that ends it, so
 * dragging across a link does not follow it.
 */
export function usePanZoom(first: (box: { width: number; height: number }) => View, resetKey: string) {
  const boxRef = useRef<HTMLDivElement>(null);
  const [view, setView] = useState<View>({ k: 1, x: 0, y: 0 });
  const drag = useRef<{ x: number; y: number; view: View; moved: boolean } | undefined>(undefined);
  const firstRef = useRef(first);
  firstRef.current = first;

  const boxSize = () => {
    const el = boxRef.current;
    return { width: el?.clientWidth ?? 800, height: el?.clientHeight ?? 400 };
  };
  const reset = useCallback(() => setView(firstRef.current(boxSize())), []);
  useLayoutEffect(reset, [resetKey]);

  useEffect(() => {
    const el = boxRef.current;
    if (el === null) return;
    const onWheel = (e: WheelEvent) => {
      e.preventDefault();
      const rect = el.getBoundingClientRect();
      const factor = Math.exp(-e.deltaY * (e.deltaMode === 1 ? 0.05 : 0.0015));
      setView((v) => zoomAt(v, factor, e.clientX - rect.left, e.clientY - rect.top));
    };
    // Not passive: the wheel zooms the drawing instead of scrolling the page.
    el.addEventListener("wheel", onWheel, { passive: false });
    return () => el.removeEventListener("wheel", onWheel);
  }, []);

  const handlers = {
    onPointerDown(e: PointerEvent) {
      if (e.button !== 0) return;
      drag.current = { x: e.clientX, y: e.clientY, view, moved: false };
    },
    onPointerMove(e: PointerEvent) {
      const d = drag.current;
      if (d === undefined) return;
      const dx = e.clientX - d.x;
      const dy = e.clientY - d.y;
      if (!d.moved && Math.hypot(dx, dy) < 4) return;
      if (!d.moved) (e.currentTarget as Element).setPointerCapture?.(e.pointerId);
      d.moved = true;
      setView({ ...d.view, x: d.view.x + dx, y: d.view.y + dy });
    },
    onPointerUp() {
      const d = drag.current;
      drag.current = undefined;
      if (d?.moved === true) {
        // The click that ends a drag must not follow a link under the pointer.
        const swallow = (e: Event) => {
          e.preventDefault();
          e.stopPropagation();
        };
        addEventListener("click", swallow, { capture: true, once: true });
        setTimeout(() => removeEventListener("click", swallow, { capture: true }), 0);
      }
    },
    onKeyDown(e: KeyboardEvent) {
      const { width, height } = boxSize();
      const step = 40;
      const moves: Record<string, () => View> = {
        ArrowLeft: () => ({ ...view, x: view.x + step }),
        ArrowRight: () => ({ ...view, x: view.x - step }),
        ArrowUp: () => ({ ...view, y: view.y + step }),
        ArrowDown: () => ({ ...view, y: view.y - step }),
        "+": () => zoomAt(view, 1.25, width / 2, height / 2),
        "=": () => zoomAt(view, 1.25, width / 2, height / 2),
        "-": () => zoomAt(view, 0.8, width / 2, height / 2),
        "0": () => firstRef.current({ width, height }),
      };
      const move = moves[e.key];
      if (move === undefined) return;
      e.preventDefault();
      setView(move());
    },
  };
  const zoom = (factor: number) => {
    const { width, height } = boxSize();
    setView((v) => zoomAt(v, factor, width / 2, height / 2));
  };
  return { boxRef, view, setView, boxSize, reset, zoom, handlers };
}
