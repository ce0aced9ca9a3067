// biome-ignore-all lint/a11y/useSemanticElements: rows in view are absolutely placed divs, so the table's roles are given explicitly.
// biome-ignore-all lint/a11y/useFocusableInteractive: a table row is not interactive here; its links are.
// biome-ignore-all lint/a11y/noNoninteractiveTabindex: the scrolled body must take the keyboard to scroll.
import { elementScroll, observeElementOffset, observeElementRect, Virtualizer } from "@tanstack/virtual-core";
import type { ComponentChildren } from "preact";
import { useEffect, useLayoutEffect, useReducer, useRef, useState } from "preact/hooks";

const ROW_HEIGHT = 28;

/**
 * A table whose body renders only the rows in view (TanStack Virtual), so 100,000 rows cost what
 * forty do. `rowAt` returns undefined for a row not loaded yet; `onRange` tells the caller which
 * rows are in view so it can fetch their page.
 */
export function VirtualTable<T>(props: {
  count: number;
  columns: string[];
  rowAt: (index: number) => T | undefined;
  renderRow: (row: T) => ComponentChildren[];
  onRange?: (start: number, end: number) => void;
  testId: string;
  /** What the table lists, for screen readers. */
  label: string;
  height?: number;
}) {
  const scrollRef = useRef<HTMLDivElement>(null);
  const [, rerender] = useReducer((n: number) => n + 1, 0);
  const [virtualizer] = useState(
    () =>
      new Virtualizer<HTMLDivElement, Element>({
        count: props.count,
        getScrollElement: () => scrollRef.current,
        estimateSize: () => ROW_HEIGHT,
        overscan: 10,
        scrollToFn: elementScroll,
        observeElementRect,
        observeElementOffset,
        onChange: () => rerender(0),
      }),
  );
  virtualizer.setOptions({ ...virtualizer.options, count: props.count });
  useLayoutEffect(() => virtualizer._didMount(), [virtualizer]);
  useLayoutEffect(() => virtualizer._willUpdate());
  const items = virtualizer.getVirtualItems();
  const first = items[0]?.index ?? 0;
  const last = items[items.length - 1]?.index ?? 0;
  useEffect(() => {
    if (props.count > 0) props.onRange?.(first, last);
  }, [first, last, props.count]);

  return (
    // Table roles on divs: only the rows in view exist, so aria-rowcount and aria-rowindex say
    // where they are in the whole table.
    <div
      class="vtable"
      data-testid={props.testId}
      data-rows={props.count}
      role="table"
      aria-label={props.label}
      aria-rowcount={props.count + 1}
    >
      <div role="rowgroup">
        <div
          class="vtable-head"
          role="row"
          aria-rowindex={1}
          style={{ gridTemplateColumns: `repeat(${props.columns.length}, minmax(0, 1fr))` }}
        >
          {props.columns.map((c) => (
            <div key={c} role="columnheader">
              {c}
            </div>
          ))}
        </div>
      </div>
      <div
        class="vtable-body"
        role="rowgroup"
        tabIndex={0}
        ref={scrollRef}
        style={{ height: `${props.height ?? 420}px` }}
      >
        <div role="presentation" style={{ height: `${virtualizer.getTotalSize()}px`, position: "relative" }}>
          {items.map((item) => {
            const row = props.rowAt(item.index);
            return (
              <div
                key={item.key}
                class="vtable-row"
                role="row"
                aria-rowindex={item.index + 2}
                data-index={item.index}
                style={{
                  transform: `translateY(${item.start}px)`,
                  height: `${ROW_HEIGHT}px`,
                  gridTemplateColumns: `repeat(${props.columns.length}, minmax(0, 1fr))`,
                }}
              >
                {row === undefined ? (
                  <div class="muted" role="cell">
                    loading…
                  </div>
                ) : (
                  props.renderRow(row).map((cell, i) => (
                    <div key={i} role="cell">
                      {cell}
                    </div>
                  ))
                )}
              </div>
            );
          })}
        </div>
      </div>
    </div>
  );
}
