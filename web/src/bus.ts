// What the event stream says, passed on to whoever shows jobs (the gallery, the lightbox).
import type { Job } from "./api";

export type JobEvent = { type: "update"; job: Job } | { type: "deleted"; id: string } | { type: "resync" };
type Listener = (e: JobEvent) => void;

const listeners = new Set<Listener>();
export const bus = {
  on(fn: Listener): () => void {
    listeners.add(fn);
    return () => listeners.delete(fn);
  },
  emit(e: JobEvent) {
    for (const fn of [...listeners]) fn(e);
  },
};
