// One clip of the gallery.  Completed: its poster, and the clip itself playing muted while hovered or
// focused.  In flight: the prompt, the thumbnails of its references and the live progress.  Failed or
// cancelled: the server's error.  Badges: the status, and a check when approved.
import { memo, useState } from "react";
import { api, ApiError, type InputMedium, type Job } from "./api";
import { inFlight, phaseText, statusLabel } from "./format";
import { useMedia } from "./media";
import { Icon } from "./Icon";

export function RefThumb({ m, size = "small" }: { m: InputMedium; size?: "small" | "rail" }) {
  const src = useMedia(m.kind === "image" ? m.url : m.poster_url);
  const label = m.role === "first_frame" ? "first frame" : m.role === "last_frame" ? "last frame" : m.type.replace("_", " ");
  return (
    <span className={`ref-thumb ${size} kind-${m.kind ?? "gone"}`} title={label}>
      {src ? <img src={src} alt={label} /> : <Icon name={m.kind === "audio" ? "audio" : "image"} />}
      {m.role === "last_frame" && <span className="ref-pin" aria-hidden="true"><Icon name="pin" /></span>}
    </span>
  );
}

export const Tile = memo(function Tile({ job, onOpen }: { job: Job; onOpen(id: string): void }) {
  const [hover, setHover] = useState(false);
  const [busy, setBusy] = useState(false);
  const [err, setErr] = useState<string | null>(null);
  const done = job.status === "completed";
  const poster = useMedia(done ? job.thumbnail_url : null);
  const clip = useMedia(done && hover ? job.video_url : null);
  const live = inFlight(job);
  const [w, h] = job.size.split("x").map(Number);
  const refs = job.input_media ?? [];

  const cancel = async () => {
    setBusy(true);
    setErr(null);
    try {
      await api.remove(job.id);
    } catch (e) {
      setErr(e instanceof ApiError ? e.message : String(e));
    } finally {
      setBusy(false);
    }
  };

  return (
    <article
      className={`tile status-${job.status}${job.rating ? " rated-" + job.rating : ""}`}
      data-id={job.id}
      data-status={job.status}
      data-rating={job.rating ?? ""}
      data-progress={job.progress}
    >
      <a
        className="tile-media"
        href={"/g/" + encodeURIComponent(job.id)}
        aria-label={`Open clip: ${job.prompt ?? ""}`}
        style={{ aspectRatio: w && h ? `${Math.max(0.56, Math.min(1.78, w / h))}` : undefined }}
        onClick={(e) => {
          if (e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
          e.preventDefault();
          onOpen(job.id);
        }}
        onMouseEnter={() => setHover(true)}
        onMouseLeave={() => setHover(false)}
        onFocus={() => setHover(true)}
        onBlur={() => setHover(false)}
      >
        {done && poster && <img className="tile-poster" src={poster} alt="" loading="lazy" />}
        {done && clip && <video className="tile-video" src={clip} muted loop autoPlay playsInline aria-hidden="true" />}
        {!done && (
          <div className="tile-pending">
            <p className="tile-pending-prompt">{job.prompt}</p>
            {refs.length > 0 && (
              <div className="tile-refs" aria-label="References">
                {refs.map((m, i) => <RefThumb key={i} m={m} />)}
              </div>
            )}
            {job.error && <p className="tile-error">{job.error.message}</p>}
            {live && (
              <div className="tile-progress">
                <div className="progress" role="progressbar" aria-label="Progress" aria-valuemin={0}
                  aria-valuemax={100} aria-valuenow={job.progress}>
                  <div style={{ width: `${job.progress}%` }} />
                </div>
                <span className="tile-phase">{phaseText(job)} · {job.progress}%</span>
              </div>
            )}
          </div>
        )}
        {!done && <span className={`badge badge-${job.status}`}>{statusLabel[job.status]}</span>}
        {done && refs.length > 0 && (
          <span className="tile-refs corner" aria-label="References">
            {refs.slice(0, 3).map((m, i) => <RefThumb key={i} m={m} />)}
          </span>
        )}
        {job.rating === "approved" && (
          <span className="check" role="img" aria-label="Approved"><Icon name="check" /></span>
        )}
        {job.rating === "rejected" && (
          <span className="reject-mark" role="img" aria-label="Rejected"><Icon name="x" /></span>
        )}
      </a>
      <div className="tile-foot">
        <p className="tile-prompt" title={job.prompt ?? ""}>{job.prompt}</p>
        <div className="tile-meta">
          <span>{job.size.replace("x", "×")} · {job.seconds} s</span>
          {live && (
            <button className="btn small ghost" onClick={cancel} disabled={busy} aria-label="Cancel job">
              Cancel
            </button>
          )}
        </div>
        {err && <p className="tile-error" role="alert">{err}</p>}
      </div>
    </article>
  );
});
