// One clip, at /g/{id}: the player (or, from the rail, one of its references), its parameters, seed and
// per-phase timings, and what can be done with it: approve / reject (every open tab sees it through the
// event stream), rerun with a new seed, edit and resubmit with the seed kept, download, copy the prompt,
// cancel or delete.
import { useEffect, useRef, useState } from "react";
import { api, ApiError, type InputMedium, type Job, type Rating } from "./api";
import { bus } from "./bus";
import { ago, inFlight, phaseText, secs, statusLabel } from "./format";
import { Icon } from "./Icon";
import { useMedia } from "./media";
import { Player, type PlayerHandle } from "./Player";
import { requestOf } from "./request";
import { RefThumb } from "./Tile";

const PHASES = ["resolve", "load", "encode", "noise", "denoise", "decode video", "decode audio", "write"];

function typing(t: EventTarget | null): boolean {
  const el = t as HTMLElement | null;
  if (!el) return false;
  const tag = el.tagName;
  if (tag === "TEXTAREA" || tag === "SELECT" || el.isContentEditable) return true;
  return tag === "INPUT" && !["range", "checkbox", "radio", "button"].includes((el as HTMLInputElement).type);
}

function Reference({ m }: { m: InputMedium }) {
  const src = useMedia(m.url);
  const poster = useMedia(m.poster_url);
  if (!src) return <div className="viewer-empty">This upload is no longer on the server.</div>;
  if (m.kind === "image") return <img className="viewer-img" src={src} alt={m.role.replace("_", " ")} />;
  if (m.kind === "audio") return <audio className="viewer-audio" src={src} controls aria-label="Reference audio" />;
  return <video className="viewer-img" src={src} poster={poster ?? undefined} controls loop playsInline aria-label="Reference video" />;
}

function Result({ job, player }: { job: Job; player: React.RefObject<PlayerHandle | null> }) {
  const src = useMedia(job.status === "completed" ? job.video_url : null);
  const poster = useMedia(job.status === "completed" ? job.thumbnail_url : null);
  if (job.status === "completed")
    return src ? <Player ref={player} src={src} poster={poster} frames={job.num_frames} /> : <div className="viewer-empty">Loading…</div>;
  return (
    <div className="viewer-pending">
      <p className="viewer-pending-prompt">{job.prompt}</p>
      {inFlight(job) && (
        <>
          <div className="progress big" role="progressbar" aria-label="Progress" aria-valuemin={0} aria-valuemax={100}
            aria-valuenow={job.progress}>
            <div style={{ width: `${job.progress}%` }} />
          </div>
          <p className="viewer-phase">{phaseText(job)} · {job.progress}%</p>
        </>
      )}
      {job.error && (
        <p className="viewer-error" role="alert">
          <strong>{statusLabel[job.status]}</strong>: {job.error.message}
          {job.error.code && <span className="code"> ({job.error.code})</span>}
        </p>
      )}
    </div>
  );
}

export function Lightbox(props: { id: string; onClose(): void; onOpen(id: string): void; onEdit(job: Job): void }) {
  const { id } = props;
  const [job, setJob] = useState<Job | null>(null);
  const [missing, setMissing] = useState<string | null>(null);
  const [view, setView] = useState(-1); // -1: the result; else an index of input_media
  const [actionError, setActionError] = useState<string | null>(null);
  const [note, setNote] = useState<string | null>(null);
  const [confirmDelete, setConfirmDelete] = useState(false);
  const [busy, setBusy] = useState(false);
  const player = useRef<PlayerHandle>(null);
  const closeBtn = useRef<HTMLButtonElement>(null);

  // the job in detail, again when it finishes (timings, resolved params)
  const fetchJob = useRef(async () => {});
  fetchJob.current = async () => {
    try {
      setJob(await api.get(id));
      setMissing(null);
    } catch (e) {
      if (e instanceof ApiError && e.status === 404) setMissing("This clip is not on the server (deleted?).");
      else setMissing(e instanceof ApiError ? e.message : String(e));
    }
  };
  useEffect(() => {
    setJob(null);
    setMissing(null);
    setView(-1);
    setActionError(null);
    setNote(null);
    setConfirmDelete(false);
    fetchJob.current();
  }, [id]);
  useEffect(
    () =>
      bus.on((e) => {
        if (e.type === "deleted" && e.id === id) {
          setJob(null);
          setMissing("This clip was deleted.");
        } else if (e.type === "update" && e.job.id === id) {
          setJob((cur) => {
            if (cur && cur.status !== e.job.status && !inFlight(e.job)) fetchJob.current();
            return cur ? { ...cur, ...e.job } : cur;
          });
        } else if (e.type === "resync") {
          fetchJob.current();
        }
      }),
    [id],
  );

  useEffect(() => {
    closeBtn.current?.focus();
    document.body.classList.add("locked");
    return () => document.body.classList.remove("locked");
  }, []);
  useEffect(() => {
    const prev = document.title;
    if (job?.prompt) document.title = "h3 · " + job.prompt.slice(0, 60);
    return () => { document.title = prev; };
  }, [job?.prompt]);

  // the player's keys
  useEffect(() => {
    const onKey = (e: KeyboardEvent) => {
      if (e.key === "Escape") {
        e.preventDefault();
        props.onClose();
        return;
      }
      if (typing(e.target) || e.ctrlKey || e.metaKey || e.altKey) return;
      const p = player.current;
      if (!p || view !== -1) return;
      const k = e.key;
      if (k === "ArrowRight" || k === "ArrowLeft") {
        e.preventDefault();
        p.step((k === "ArrowRight" ? 1 : -1) * (e.shiftKey ? 24 : 1));
      } else if (k === " " || k === "k") {
        e.preventDefault();
        p.toggle();
      } else if (k === "l" || k === "L") {
        p.toggleLoop();
      } else if (k === "m" || k === "M") {
        p.toggleMute();
      }
    };
    window.addEventListener("keydown", onKey);
    return () => window.removeEventListener("keydown", onKey);
  });

  const act = async (what: () => Promise<void>) => {
    setBusy(true);
    setActionError(null);
    setNote(null);
    try {
      await what();
    } catch (e) {
      setActionError(e instanceof ApiError ? e.message : String(e));
    } finally {
      setBusy(false);
    }
  };
  const rate = (r: Rating) =>
    act(async () => {
      if (!job) return;
      const next = job.rating === r ? null : r;
      const j = await api.rate(job.id, next);
      setJob((cur) => (cur ? { ...cur, rating: j.rating } : cur));
    });
  const rerun = () =>
    act(async () => {
      if (!job) return;
      const j = await api.create({ ...requestOf(job), seed: "random" });
      props.onOpen(j.id);
    });
  const remove = () =>
    act(async () => {
      if (!job) return;
      if (!inFlight(job) && !confirmDelete) {
        setConfirmDelete(true);
        setTimeout(() => setConfirmDelete(false), 5000);
        return;
      }
      const r = await api.remove(job.id);
      if (r.deleted) props.onClose();
      else setNote("Cancelling…");
    });
  const copy = () =>
    act(async () => {
      if (!job?.prompt) return;
      try {
        await navigator.clipboard.writeText(job.prompt);
        setNote("Prompt copied.");
      } catch {
        throw new Error("the browser refused the clipboard: select the prompt and copy it by hand");
      }
    });

  const media = job?.input_media ?? [];
  const t = job?.timings as Record<string, number> | null | undefined;
  const rp = (job?.resolved_params ?? job?.params ?? {}) as Record<string, unknown>;
  const total = t && typeof t.total_s === "number" ? t.total_s : 0;

  return (
    <div className="lightbox" role="dialog" aria-modal="true" aria-label="Clip">
      <div className="lb-top">
        <button ref={closeBtn} className="icon-btn" onClick={props.onClose} aria-label="Close" title="Esc">
          <Icon name="close" />
        </button>
        <span className="lb-title">{job?.prompt ?? ""}</span>
      </div>
      {missing && !job && (
        <div className="lb-missing" role="alert">
          {missing} <button className="btn small" onClick={props.onClose}>Back to the gallery</button>
        </div>
      )}
      {job && (
        <div className="lb-body">
          <nav className="rail" aria-label="Viewer">
            <button className={`rail-item${view === -1 ? " on" : ""}`} onClick={() => setView(-1)}
              aria-pressed={view === -1} aria-label="Result">
              <ResultThumb job={job} />
              <span>Result</span>
            </button>
            {media.map((m, i) => (
              <button key={i} className={`rail-item${view === i ? " on" : ""}`} onClick={() => setView(i)}
                aria-pressed={view === i} aria-label={`Reference ${i + 1}: ${m.role.replace("_", " ")}`}>
                <RefThumb m={m} size="rail" />
                <span>{m.role === "first_frame" ? "First" : m.role === "last_frame" ? "Last" : m.type === "audio" ? "Audio" : `Ref ${i + 1}`}</span>
              </button>
            ))}
          </nav>
          <div className="viewer">
            {view === -1 || !media[view] ? <Result job={job} player={player} /> : <Reference m={media[view]} />}
          </div>
          <aside className="details" aria-label="Details">
            <div className="details-head">
              <span className={`badge badge-${job.status}`} data-status={job.status}>{statusLabel[job.status]}</span>
              {job.rating === "approved" && <span className="check inline" role="img" aria-label="Approved"><Icon name="check" /></span>}
              <span className="muted">{ago(job.created_at)}</span>
            </div>
            <p className="details-prompt">{job.prompt}</p>
            <div className="actions">
              <button className={`btn${job.rating === "approved" ? " on good" : ""}`} onClick={() => rate("approved")}
                aria-pressed={job.rating === "approved"} disabled={busy}>
                <Icon name="thumbup" /> Approve
              </button>
              <button className={`btn${job.rating === "rejected" ? " on bad" : ""}`} onClick={() => rate("rejected")}
                aria-pressed={job.rating === "rejected"} disabled={busy}>
                <Icon name="thumbdown" /> Reject
              </button>
            </div>
            <div className="actions">
              <button className="btn" onClick={rerun} disabled={busy} title="The same request with a new seed">
                <Icon name="rerun" /> Rerun
              </button>
              <button className="btn" onClick={() => props.onEdit(job)} disabled={busy} title="Into the prompt bar, seed kept">
                <Icon name="edit" /> Edit
              </button>
              {job.status === "completed" && job.video_url && <Download job={job} />}
              <button className="btn" onClick={copy} disabled={busy || !job.prompt}>
                <Icon name="copy" /> Copy prompt
              </button>
              <button className={`btn${confirmDelete ? " danger" : ""}`} onClick={remove} disabled={busy}>
                <Icon name={inFlight(job) ? "close" : "trash"} />
                {inFlight(job) ? "Cancel" : confirmDelete ? "Confirm delete" : "Delete"}
              </button>
            </div>
            {actionError && <p className="error-text" role="alert">{actionError}</p>}
            {note && <p className="note" role="status">{note}</p>}
            <dl className="params">
              <dt>Size</dt><dd>{job.size.replace("x", " × ")}</dd>
              <dt>Length</dt><dd>{job.seconds} s · {job.num_frames} frames</dd>
              <dt>Steps</dt><dd>{job.num_inference_steps}</dd>
              <dt>Seed</dt><dd className="mono" data-seed={job.seed}>{job.seed}</dd>
              <dt>Audio</dt><dd>{rp.audio === false ? "off" : "on"}</dd>
              <dt>Partition</dt><dd>{String(rp.partition ?? "auto")}</dd>
              {media.length > 0 && (<><dt>Inputs</dt><dd>{media.map((m) => m.role === "reference" ? m.type : m.role.replace("_", " ")).join(", ")}</dd></>)}
            </dl>
            {t && (
              <div className="timings" aria-label="Timings">
                <h3>Timings <span className="muted">{secs(total)} in all</span></h3>
                {PHASES.filter((p) => typeof t[p] === "number").map((p) => (
                  <div className="timing" key={p}>
                    <span className="timing-name">{p}</span>
                    <span className="timing-bar"><span style={{ width: `${total ? (100 * t[p]) / total : 0}%` }} /></span>
                    <span className="timing-val">{secs(t[p])}</span>
                  </div>
                ))}
                {typeof t.step_s === "number" && <p className="muted">{secs(t.step_s)} a step{t.prompt_cached ? " · prompt cached" : ""}</p>}
              </div>
            )}
          </aside>
        </div>
      )}
    </div>
  );
}

function Download({ job }: { job: Job }) {
  const href = useMedia(job.video_url);
  return (
    <a className="btn" href={href ?? undefined} download={job.id + ".mp4"} aria-disabled={!href}>
      <Icon name="download" /> Download
    </a>
  );
}

function ResultThumb({ job }: { job: Job }) {
  const src = useMedia(job.status === "completed" ? job.thumbnail_url : null);
  return (
    <span className="ref-thumb rail">{src ? <img src={src} alt="" /> : <Icon name="video" />}</span>
  );
}
