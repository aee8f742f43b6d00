// The page's two places: the gallery (/) and a clip's lightbox (/g/{id}), in the browser's history so that
// back, forward and reload work.  Lightboxes opened from the gallery are counted in history.state, so that
// closing one goes back to the gallery entry instead of stacking new ones.
import { useEffect, useState } from "react";

export interface Route { jobId: string | null }

function current(): Route {
  const m = /^\/g\/([^/]+)\/?$/.exec(location.pathname);
  return { jobId: m ? decodeURIComponent(m[1]) : null };
}

const subs = new Set<() => void>();
window.addEventListener("popstate", () => subs.forEach((f) => f()));

export function useRoute(): Route {
  const [r, setR] = useState(current);
  useEffect(() => {
    const f = () => setR(current());
    subs.add(f);
    return () => { subs.delete(f); };
  }, []);
  return r;
}

function depth(): number {
  const d = (history.state as { h3depth?: number } | null)?.h3depth;
  return typeof d === "number" ? d : 0;
}

export function openJob(id: string) {
  history.pushState({ h3depth: depth() + 1 }, "", "/g/" + encodeURIComponent(id));
  subs.forEach((f) => f());
}

export function closeJob() {
  const d = depth();
  if (d > 0) history.go(-d); // back to the gallery entry it was opened from
  else {
    history.pushState({ h3depth: 0 }, "", "/");
    subs.forEach((f) => f());
  }
}
