// The server's event stream (GET /api/events, docs/HTTP.md "Events") read through fetch, so that it can
// carry the API key (EventSource cannot send headers).  It reconnects by itself with Last-Event-ID, so
// nothing is missed while it was away; each (re)connection is announced so the gallery can resync.
import { authHeaders, parse, type Job } from "./api";

export type StreamState = "connecting" | "open" | "reconnecting" | "unauthorized";

export interface StreamHandlers {
  update(job: Job): void;
  deleted(id: string): void;
  state(s: StreamState): void;
  opened(): void; // after every (re)connection: the events from here on are live
}

/** Starts the stream; returns a function that stops it. */
export function openEvents(h: StreamHandlers): () => void {
  const stop = new AbortController();
  let last: string | null = null;
  let retryMs = 2000;
  let wasOpen = false;

  const dispatch = (block: string) => {
    let type = "message", data = "";
    for (const line of block.split(/\r?\n/)) {
      if (!line || line.startsWith(":")) continue;
      const i = line.indexOf(":");
      const field = i < 0 ? line : line.slice(0, i);
      const value = i < 0 ? "" : line.slice(i + 1).replace(/^ /, "");
      if (field === "id") last = value;
      else if (field === "event") type = value;
      else if (field === "data") data += (data ? "\n" : "") + value;
      else if (field === "retry" && /^\d+$/.test(value)) retryMs = Math.max(500, Number(value));
    }
    if (!data) return;
    try {
      if (type === "generation_update") h.update(parse<Job>(data));
      else if (type === "generation_deleted") h.deleted(parse<{ id: string }>(data).id);
    } catch (e) {
      console.warn("h3: an event that does not parse", e);
    }
  };

  (async () => {
    for (;;) {
      if (stop.signal.aborted) return;
      h.state(wasOpen ? "reconnecting" : "connecting");
      try {
        const r = await fetch("/api/events", {
          headers: authHeaders(last !== null ? { "Last-Event-ID": last } : {}),
          signal: stop.signal,
          cache: "no-store",
        });
        if (r.status === 401) {
          h.state("unauthorized");
          return; // the key is changed through the settings, which reloads the page
        }
        if (!r.ok || !r.body) throw new Error("HTTP " + r.status);
        const reader = r.body.getReader();
        const dec = new TextDecoder();
        let buf = "";
        let announced = false;
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buf += dec.decode(value, { stream: true });
          if (!announced) {
            // the first bytes are the server's hello ("retry: 2000", ": h3 events after N"): live from here
            const m = /: h3 events after (\d+)/.exec(buf);
            if (m && last === null) last = m[1];
            announced = true;
            wasOpen = true;
            h.state("open");
            h.opened();
          }
          let i: number;
          while ((i = buf.search(/\r?\n\r?\n/)) >= 0) {
            const block = buf.slice(0, i);
            buf = buf.slice(i).replace(/^\r?\n\r?\n/, "");
            dispatch(block);
          }
        }
      } catch {
        if (stop.signal.aborted) return;
      }
      if (stop.signal.aborted) return;
      h.state("reconnecting");
      await new Promise((res) => setTimeout(res, retryMs));
    }
  })();
  return () => stop.abort();
}
