// The gallery: a grid of clips, newest first, loaded a page at a time as it scrolls; kept live by the
// event stream (new jobs appear on top, running ones show their progress, deleted ones go).
import { useCallback, useEffect, useRef, useState } from "react";
import { api, ApiError, type Job, type Status } from "./api";
import { bus } from "./bus";
import { Tile } from "./Tile";

const PAGE = 24;

export interface Filter { status: Status[]; search: string }

function matches(j: Job, f: Filter): boolean {
  if (f.status.length && !f.status.includes(j.status)) return false;
  return !f.search || (j.prompt || "").toLowerCase().includes(f.search.toLowerCase());
}

function merge(old: Job | undefined, j: Job): Job {
  // events carry the list form of a job: keep what the detail form added
  return old ? { ...old, ...j } : j;
}

export function useGallery(filter: Filter) {
  const [items, setItems] = useState<Job[]>([]);
  const [hasMore, setHasMore] = useState(false);
  const [loading, setLoading] = useState(true);
  const [error, setError] = useState<ApiError | null>(null);
  const gen = useRef(0); // answers of an older filter are dropped
  const filterRef = useRef(filter);
  filterRef.current = filter;
  const itemsRef = useRef(items);
  itemsRef.current = items;

  const load = useCallback(async (offset: number, limit = PAGE) => {
    const g = offset === 0 ? ++gen.current : gen.current;
    setLoading(true);
    try {
      const f = filterRef.current;
      const page = await api.list({ status: f.status, search: f.search, limit, offset });
      if (g !== gen.current) return;
      setItems((cur) => {
        const base = offset === 0 ? [] : cur;
        const seen = new Set(base.map((j) => j.id));
        const old = new Map(cur.map((j) => [j.id, j]));
        return [...base, ...page.items.filter((j) => !seen.has(j.id)).map((j) => merge(old.get(j.id), j))];
      });
      setHasMore(page.has_more);
      setError(null);
    } catch (e) {
      if (g === gen.current) setError(e instanceof ApiError ? e : new ApiError(0, String(e)));
    } finally {
      if (g === gen.current) setLoading(false);
    }
  }, []);

  // another filter: its first page, from the top (where the page was scrolled to belongs to the old list)
  useEffect(() => {
    window.scrollTo({ top: 0 });
    load(0);
  }, [filter.search, filter.status.join(","), load]);

  useEffect(
    () =>
      bus.on((e) => {
        if (e.type === "resync") {
          // after a reconnection: as many clips as were shown (the server's page holds 200 at most), so
          // that the place scrolled to stays
          load(0, Math.min(200, Math.max(PAGE, itemsRef.current.length)));
        } else if (e.type === "deleted") {
          setItems((cur) => cur.filter((j) => j.id !== e.id));
        } else {
          const j = e.job;
          setItems((cur) => {
            const i = cur.findIndex((x) => x.id === j.id);
            if (i >= 0) {
              const next = cur.slice();
              next[i] = merge(cur[i], j);
              return next;
            }
            // a job this list has not seen: a new one goes on top (an old one further down is paged in later)
            if (j.status === "queued" && matches(j, filterRef.current)) return [j, ...cur];
            return cur;
          });
        }
      }),
    [load],
  );

  const loadMore = useCallback(() => {
    if (!loading && hasMore) load(itemsRef.current.length);
  }, [loading, hasMore, load]);

  return { items, hasMore, loading, error, loadMore, reload: () => load(0) };
}

export function Gallery(props: {
  gallery: ReturnType<typeof useGallery>;
  filtered: boolean;
  onOpen(id: string): void;
}) {
  const { items, hasMore, loading, error, loadMore, reload } = props.gallery;
  const sentinel = useRef<HTMLDivElement>(null);
  useEffect(() => {
    const el = sentinel.current;
    if (!el) return;
    const io = new IntersectionObserver((es) => es.some((e) => e.isIntersecting) && loadMore(), {
      rootMargin: "800px 0px",
    });
    io.observe(el);
    return () => io.disconnect();
  }, [loadMore]);

  return (
    <section className="gallery" aria-label="Clips" aria-busy={loading}>
      {error && (
        <div className="notice error" role="alert">
          {error.status === 401 ? "This server needs an API key: set it in Settings (the key icon)." : error.message}
          <button className="btn small" onClick={reload}>Retry</button>
        </div>
      )}
      {!error && !loading && items.length === 0 && (
        <div className="empty">
          {props.filtered ? "No clip matches." : "No clips yet. Describe one below and press Ctrl+Enter."}
        </div>
      )}
      <div className="grid">
        {items.map((j) => (
          <Tile key={j.id} job={j} onOpen={props.onOpen} />
        ))}
      </div>
      <div ref={sentinel} className="sentinel" aria-hidden="true" />
      {hasMore && (
        <div className="more">
          <button className="btn small" onClick={loadMore} disabled={loading}>
            {loading ? "Loading…" : "Load more"}
          </button>
        </div>
      )}
    </section>
  );
}
