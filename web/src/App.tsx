// The gallery page: the header (search, status filters, connection, settings), the grid, the prompt bar,
// and the lightbox of /g/{id} over them.
import { useCallback, useEffect, useMemo, useRef, useState } from "react";
import { api, apiKey, type Job, type ServerStatus, type Status } from "./api";
import { bus } from "./bus";
import { openEvents, type StreamState } from "./events";
import { Gallery, useGallery, type Filter } from "./Gallery";
import { Icon } from "./Icon";
import { Lightbox } from "./Lightbox";
import { PromptBar, useComposer } from "./PromptBar";
import { attachedOf, settingsOf } from "./request";
import { closeJob, openJob, useRoute } from "./route";

const FILTERS: { label: string; status: Status[] }[] = [
  { label: "All", status: [] },
  { label: "In flight", status: ["queued", "in_progress"] },
  { label: "Completed", status: ["completed"] },
  { label: "Failed", status: ["failed"] },
  { label: "Cancelled", status: ["cancelled"] },
];

function KeyDialog({ onClose }: { onClose(): void }) {
  const [k, setK] = useState(apiKey.get());
  return (
    <div className="modal-back" onMouseDown={(e) => e.target === e.currentTarget && onClose()}>
      <form className="modal" role="dialog" aria-modal="true" aria-label="Settings"
        onKeyDown={(e) => e.key === "Escape" && onClose()}
        onSubmit={(e) => { e.preventDefault(); apiKey.set(k.trim()); location.reload(); }}>
        <h2>Settings</h2>
        <label htmlFor="api-key">API key of this server (<code>h3 serve --api-key</code>)</label>
        <input id="api-key" type="password" autoComplete="off" autoFocus value={k} onChange={(e) => setK(e.target.value)}
          placeholder="none" />
        <p className="hint">Kept in this browser only. Every request to the API carries it.</p>
        <div className="actions end">
          <button type="button" className="btn ghost" onClick={onClose}>Cancel</button>
          <button type="submit" className="btn primary">Save</button>
        </div>
      </form>
    </div>
  );
}

export function App() {
  const route = useRoute();
  const [search, setSearch] = useState("");
  const [query, setQuery] = useState(""); // the search, debounced
  const [filterIx, setFilterIx] = useState(0);
  const [stream, setStream] = useState<StreamState>("connecting");
  const [server, setServer] = useState<ServerStatus | null>(null);
  const [settingsOpen, setSettingsOpen] = useState(false);
  const searchInput = useRef<HTMLInputElement>(null);
  const composer = useComposer();

  const filter: Filter = useMemo(() => ({ status: FILTERS[filterIx].status, search: query }), [filterIx, query]);
  const gallery = useGallery(filter);

  useEffect(() => {
    const t = setTimeout(() => setQuery(search.trim()), 200);
    return () => clearTimeout(t);
  }, [search]);

  useEffect(() => {
    let first = true;
    return openEvents({
      update: (job) => bus.emit({ type: "update", job }),
      deleted: (id) => bus.emit({ type: "deleted", id }),
      state: setStream,
      opened: () => {
        if (!first) bus.emit({ type: "resync" }); // whatever changed while it was away
        first = false;
        api.status().then(setServer, () => {});
      },
    });
  }, []);

  // Ctrl/⌘-K: the search
  useEffect(() => {
    const onKey = (e: KeyboardEvent) => {
      if ((e.ctrlKey || e.metaKey) && (e.key === "k" || e.key === "K")) {
        e.preventDefault();
        searchInput.current?.focus();
        searchInput.current?.select();
      }
    };
    window.addEventListener("keydown", onKey);
    return () => window.removeEventListener("keydown", onKey);
  }, []);

  const onOpen = useCallback((id: string) => openJob(id), []);
  const onEdit = (job: Job) => {
    composer.load(job.prompt ?? "", settingsOf(job), attachedOf(job));
    closeJob();
  };

  return (
    <div className="app">
      <header className="top" inert={!!route.jobId}>
        <a className="brand" href="/" onClick={(e) => { e.preventDefault(); if (route.jobId) closeJob(); }}>h3</a>
        <div className="search">
          <Icon name="search" />
          <input ref={searchInput} type="search" aria-label="Search prompts" placeholder="Search prompts"
            value={search} onChange={(e) => setSearch(e.target.value)}
            onKeyDown={(e) => { if (e.key === "Escape") { setSearch(""); (e.target as HTMLInputElement).blur(); } }} />
          <kbd>Ctrl K</kbd>
        </div>
        <div className="filters" role="group" aria-label="Status filter">
          {FILTERS.map((f, i) => (
            <button key={f.label} className={i === filterIx ? "on" : ""} aria-pressed={i === filterIx}
              onClick={() => setFilterIx(i)}>
              {f.label}
            </button>
          ))}
        </div>
        <span className="spacer" />
        {server && (
          <span className="server" title={`${server.model} on ${server.device}`}>
            <span className={`dot ${stream === "open" ? "ok" : "bad"}`} aria-hidden="true" />
            {server.model} · {server.device}
          </span>
        )}
        <button className="icon-btn" aria-label="Settings" title="API key" onClick={() => setSettingsOpen(true)}>
          <Icon name="key" />
        </button>
      </header>
      {stream === "reconnecting" && (
        <div className="banner" role="status">Reconnecting to the server… live updates resume when it answers.</div>
      )}
      {stream === "unauthorized" && (
        <div className="banner bad" role="alert">
          The server refused the API key. <button className="link" onClick={() => setSettingsOpen(true)}>Set it</button>
        </div>
      )}
      <main inert={!!route.jobId}>
        <Gallery gallery={gallery} filtered={filterIx !== 0 || !!query} onOpen={onOpen} />
      </main>
      <div inert={!!route.jobId}>
        <PromptBar composer={composer} onQueued={() => {}} />
      </div>
      {route.jobId && <Lightbox id={route.jobId} onClose={closeJob} onOpen={onOpen} onEdit={onEdit} />}
      {settingsOpen && <KeyDialog onClose={() => setSettingsOpen(false)} />}
    </div>
  );
}
