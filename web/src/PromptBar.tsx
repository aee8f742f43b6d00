// The prompt bar: a multi-line prompt; images, videos and audio dropped, pasted or picked (uploaded at
// once, shown as chips with thumbnails, reordered by dragging — the model reads them in order); an image
// pinned as the last frame; a parameters popover; Ctrl/⌘-Enter submits.  Adding video or audio switches
// to the reference partition (ref2va), as the model requires.
import { useEffect, useRef, useState } from "react";
import { api, ApiError, type InputMedium } from "./api";
import { gridFrames, seconds } from "./format";
import { Icon } from "./Icon";
import { useMedia } from "./media";
import { defaultSettings, plan, settingsFields, SIZES, type Partition, type Settings } from "./request";

export interface Chip {
  key: string;
  name: string;
  kind: "image" | "video" | "audio" | "unknown";
  preview: string | null; // a local object URL (images), or the server's poster / file
  state: "uploading" | "ready" | "error";
  id?: string;
  error?: string;
  pinnedLast: boolean;
}

let chipSeq = 0;
const kindOf = (t: string): Chip["kind"] =>
  t.startsWith("image/") ? "image" : t.startsWith("video/") ? "video" : t.startsWith("audio/") ? "audio" : "unknown";

export function useComposer() {
  const [prompt, setPrompt] = useState("");
  const [chips, setChips] = useState<Chip[]>([]);
  const [settings, setSettings] = useState<Settings>(defaultSettings);
  const [switched, setSwitched] = useState<string | null>(null);
  const textarea = useRef<HTMLTextAreaElement>(null);

  const update = (key: string, f: (c: Chip) => Chip) => setChips((cs) => cs.map((c) => (c.key === key ? f(c) : c)));

  const addFiles = (files: File[]) => {
    for (const file of files) {
      const key = "c" + ++chipSeq;
      const kind = kindOf(file.type);
      const chip: Chip = {
        key, name: file.name || kind, kind, state: "uploading", pinnedLast: false,
        preview: kind === "image" ? URL.createObjectURL(file) : null,
      };
      setChips((cs) => [...cs, chip]);
      if (kind === "video" || kind === "audio") switchToRef(kind);
      api.upload([file]).then(
        ({ uploads: [u] }) => {
          update(key, (c) => ({ ...c, state: "ready", id: u.id, kind: u.kind, preview: c.preview ?? u.poster_url }));
          if (u.kind !== "image") switchToRef(u.kind);
        },
        (e) => update(key, (c) => ({ ...c, state: "error", error: e instanceof ApiError ? e.message : String(e) })),
      );
    }
  };

  const settingsRef = useRef(settings);
  settingsRef.current = settings;
  const switchToRef = (kind: string) => {
    if (settingsRef.current.partition === "ref2va") return;
    settingsRef.current = { ...settingsRef.current, partition: "ref2va" };
    setSettings((s) => ({ ...s, partition: "ref2va" }));
    setSwitched(`Switched to ref2va: the model reads ${kind} as a reference.`);
  };

  /** Edit and resubmit: a job's prompt, parameters (seed locked) and inputs. */
  const load = (p: string, s: Settings, media: { medium: InputMedium; pinnedLast: boolean }[]) => {
    setPrompt(p);
    setSettings(s);
    setSwitched(null);
    setChips(media.map(({ medium: m, pinnedLast }) => ({
      key: "c" + ++chipSeq, name: m.role.replace("_", " "), kind: m.kind ?? "unknown", state: m.kind ? "ready" : "error",
      id: m.id, pinnedLast, preview: m.kind === "image" ? m.url : m.poster_url,
      error: m.kind ? undefined : "this upload is no longer on the server",
    })));
    // the lightbox closes through the history (popstate comes later), and the bar is inert until then
    let tries = 0;
    const focus = () => {
      textarea.current?.focus();
      if (document.activeElement !== textarea.current && ++tries < 20) setTimeout(focus, 50);
    };
    setTimeout(focus, 0);
  };

  return { prompt, setPrompt, chips, setChips, settings, setSettings, switched, setSwitched, addFiles, load, textarea };
}

type Composer = ReturnType<typeof useComposer>;

function ChipView(props: {
  chip: Chip; index: number; composer: Composer; dragKey: React.MutableRefObject<string | null>;
}) {
  const { chip, index, composer } = props;
  const server = chip.preview && !chip.preview.startsWith("blob:") ? chip.preview : null; // else a local blob
  const fromServer = useMedia(server);
  const thumb = server ? fromServer : chip.preview;
  const [over, setOver] = useState(false);
  const move = (to: number) =>
    composer.setChips((cs) => {
      const from = cs.findIndex((c) => c.key === chip.key);
      if (from < 0 || to < 0 || to >= cs.length) return cs;
      const next = cs.slice();
      const [c] = next.splice(from, 1);
      next.splice(to, 0, c);
      return next;
    });
  const label = chip.kind === "unknown" ? "file" : chip.kind;
  return (
    <li
      className={`chip state-${chip.state}${chip.pinnedLast ? " pinned" : ""}${over ? " over" : ""}`}
      data-kind={chip.kind}
      data-state={chip.state}
      data-upload-id={chip.id ?? ""}
      draggable
      tabIndex={0}
      aria-label={`${index + 1}: ${label} ${chip.name}${chip.pinnedLast ? ", last frame" : ""}${chip.state === "error" ? ", refused: " + chip.error : chip.state === "uploading" ? ", uploading" : ""}`}
      title={chip.error ?? `${chip.name} (drag to reorder; Alt+← / → moves it)`}
      onDragStart={(e) => {
        props.dragKey.current = chip.key;
        e.dataTransfer.setData("application/x-h3-chip", chip.key);
        e.dataTransfer.effectAllowed = "move";
      }}
      onDragEnd={() => { props.dragKey.current = null; }}
      onDragOver={(e) => {
        if (e.dataTransfer.types.includes("application/x-h3-chip")) {
          e.preventDefault();
          setOver(true);
        }
      }}
      onDragLeave={() => setOver(false)}
      onDrop={(e) => {
        setOver(false);
        if (!e.dataTransfer.types.includes("application/x-h3-chip")) return;
        e.preventDefault();
        e.stopPropagation();
        const key = props.dragKey.current ?? e.dataTransfer.getData("application/x-h3-chip");
        composer.setChips((cs) => {
          const from = cs.findIndex((c) => c.key === key);
          const to = cs.findIndex((c) => c.key === chip.key);
          if (from < 0 || to < 0 || from === to) return cs;
          const next = cs.slice();
          const [c] = next.splice(from, 1);
          next.splice(to, 0, c);
          return next;
        });
      }}
      onKeyDown={(e) => {
        if (e.altKey && (e.key === "ArrowLeft" || e.key === "ArrowRight")) {
          e.preventDefault();
          move(index + (e.key === "ArrowLeft" ? -1 : 1));
        } else if (e.key === "Delete" || e.key === "Backspace") {
          e.preventDefault();
          composer.setChips((cs) => cs.filter((c) => c.key !== chip.key));
        }
      }}
    >
      <span className="chip-n">{index + 1}</span>
      <span className="chip-thumb">
        {thumb ? <img src={thumb} alt="" /> : <Icon name={chip.kind === "audio" ? "audio" : chip.kind === "video" ? "video" : "image"} />}
        {chip.state === "uploading" && <span className="chip-spin" aria-hidden="true" />}
      </span>
      <span className="chip-name">{chip.name}</span>
      {chip.kind === "image" && chip.state === "ready" && (
        <button type="button" className={`chip-btn${chip.pinnedLast ? " on" : ""}`} aria-pressed={chip.pinnedLast}
          aria-label={`Pin ${chip.name} as the last frame`} title="Pin as the last frame"
          onClick={() => composer.setChips((cs) => cs.map((c) => ({ ...c, pinnedLast: c.key === chip.key ? !c.pinnedLast : false })))}>
          <Icon name="pin" size={14} />
        </button>
      )}
      <button type="button" className="chip-btn" aria-label={`Remove ${chip.name}`} title="Remove"
        onClick={() => composer.setChips((cs) => cs.filter((c) => c.key !== chip.key))}>
        <Icon name="x" size={14} />
      </button>
      {chip.state === "error" && <span className="chip-error">{chip.error}</span>}
    </li>
  );
}

function Params({ composer, onClose }: { composer: Composer; onClose(): void }) {
  const { settings: s, setSettings } = composer;
  const set = (p: Partial<Settings>) => setSettings((x) => ({ ...x, ...p }));
  const n = s.frames !== null ? Math.max(1, Math.round((s.frames - 5) / 17)) : 7;
  const panel = useRef<HTMLDivElement>(null);
  useEffect(() => {
    panel.current?.querySelector<HTMLElement>("input, button, select")?.focus();
    const down = (e: MouseEvent) => {
      const t = e.target as HTMLElement;
      if (panel.current && !panel.current.contains(t) && !t.closest(".params-toggle")) onClose();
    };
    document.addEventListener("mousedown", down);
    return () => document.removeEventListener("mousedown", down);
  }, [onClose]);
  return (
    <div ref={panel} className="popover" role="dialog" aria-label="Parameters"
      onKeyDown={(e) => { if (e.key === "Escape") { e.stopPropagation(); onClose(); } }}>
      <div className="field">
        <label htmlFor="p-length">Length</label>
        <div className="field-row">
          <input id="p-length" type="range" min={1} max={20} step={1} value={n}
            onChange={(e) => set({ frames: gridFrames(Number(e.target.value)) })}
            aria-valuetext={s.frames !== null ? `${seconds(s.frames)} seconds, ${s.frames} frames` : "the server's default"} />
          <span className="field-val" data-testid="length-value">
            {s.frames !== null ? `${seconds(s.frames)} s · ${s.frames} frames` : "default"}
          </span>
          {s.frames !== null && (
            <button type="button" className="link" aria-label="Length: the server's default" onClick={() => set({ frames: null })}>
              default
            </button>
          )}
        </div>
        <p className="hint">17n + 5 frames at 24 fps</p>
      </div>
      <fieldset className="field">
        <legend>Size</legend>
        <div className="seg">
          {[null, ...SIZES].map((z) => (
            <button type="button" key={z ?? "default"} className={s.size === z ? "on" : ""} aria-pressed={s.size === z}
              onClick={() => set({ size: z })}>
              {z ? z.replace("x", "×") : "default"}
            </button>
          ))}
        </div>
      </fieldset>
      <div className="field">
        <label htmlFor="p-steps">Steps</label>
        <input id="p-steps" type="number" min={2} max={10000} placeholder="default" value={s.steps ?? ""}
          onChange={(e) => set({ steps: e.target.value === "" ? null : Math.floor(Number(e.target.value)) })} />
      </div>
      <fieldset className="field">
        <legend>Seed</legend>
        <div className="field-row">
          <div className="seg">
            <button type="button" className={s.seed === null ? "on" : ""} aria-pressed={s.seed === null}
              onClick={() => set({ seed: null })}><Icon name="shuffle" size={14} /> Random</button>
            <button type="button" className={s.seed !== null ? "on" : ""} aria-pressed={s.seed !== null}
              onClick={() => set({ seed: s.seed ?? String(Math.floor(Math.random() * 2 ** 32)) })}>
              <Icon name="lock" size={14} /> Locked
            </button>
          </div>
          <input aria-label="Seed" className="mono" inputMode="numeric" placeholder="random" value={s.seed ?? ""}
            onChange={(e) => { const v = e.target.value.replace(/\D/g, ""); set({ seed: v === "" ? null : v }); }} />
        </div>
      </fieldset>
      <div className="field">
        <label className="check-label">
          <input type="checkbox" checked={s.audio} onChange={(e) => set({ audio: e.target.checked })} /> Audio
        </label>
      </div>
      <div className="field">
        <label htmlFor="p-partition">Partition</label>
        <select id="p-partition" value={s.partition} onChange={(e) => { composer.setSwitched(null); set({ partition: e.target.value as Partition }); }}>
          <option value="auto">auto (by the inputs)</option>
          <option value="fl2va">fl2va: first / last frame</option>
          <option value="ref2va">ref2va: references</option>
        </select>
      </div>
    </div>
  );
}

function summary(s: Settings): string {
  const parts = [
    s.frames !== null ? `${seconds(s.frames)} s` : "default length",
    s.size ? s.size.replace("x", "×") : "default size",
  ];
  if (s.steps !== null) parts.push(`${s.steps} steps`);
  parts.push(s.seed !== null ? `seed ${s.seed}` : "random seed");
  if (!s.audio) parts.push("no audio");
  if (s.partition !== "auto") parts.push(s.partition);
  return parts.join(" · ");
}

export function PromptBar({ composer, onQueued }: { composer: Composer; onQueued(id: string): void }) {
  const { prompt, setPrompt, chips, settings } = composer;
  const [open, setOpen] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const [sending, setSending] = useState(false);
  const [dropping, setDropping] = useState(false);
  const dragKey = useRef<string | null>(null);
  const fileInput = useRef<HTMLInputElement>(null);

  const attached = chips.filter((c) => c.state === "ready" && c.id).map((c) => ({
    id: c.id!, kind: c.kind as "image" | "video" | "audio", pinnedLast: c.pinnedLast,
  }));
  const p = plan(attached, settings.partition);

  // files dropped anywhere on the page land here
  useEffect(() => {
    let depth = 0;
    const files = (e: DragEvent) => !!e.dataTransfer?.types.includes("Files");
    const enter = (e: DragEvent) => { if (files(e)) { depth++; setDropping(true); } };
    const leave = (e: DragEvent) => { if (files(e) && --depth <= 0) { depth = 0; setDropping(false); } };
    const over = (e: DragEvent) => { if (files(e)) e.preventDefault(); };
    const drop = (e: DragEvent) => {
      if (!files(e)) return;
      e.preventDefault();
      depth = 0;
      setDropping(false);
      const fs = [...(e.dataTransfer?.files ?? [])];
      if (fs.length) composer.addFiles(fs);
    };
    window.addEventListener("dragenter", enter);
    window.addEventListener("dragleave", leave);
    window.addEventListener("dragover", over);
    window.addEventListener("drop", drop);
    return () => {
      window.removeEventListener("dragenter", enter);
      window.removeEventListener("dragleave", leave);
      window.removeEventListener("dragover", over);
      window.removeEventListener("drop", drop);
    };
  }, [composer.addFiles]); // eslint-disable-line react-hooks/exhaustive-deps

  const submit = async () => {
    setError(null);
    if (!prompt.trim()) return setError("Write a prompt first.");
    if (chips.some((c) => c.state === "uploading")) return setError("Wait for the uploads to finish.");
    if (chips.some((c) => c.state === "error")) return setError("Remove the attachments the server refused first.");
    if (p.error) return setError(p.error);
    setSending(true);
    try {
      const j = await api.create({ prompt, ...settingsFields(settings), ...p.fields });
      setPrompt("");
      composer.setChips([]);
      composer.setSwitched(null);
      onQueued(j.id);
    } catch (e) {
      setError(e instanceof ApiError ? (e.param ? `${e.message}` : e.message) : String(e));
    } finally {
      setSending(false);
    }
  };

  return (
    <form className={`composer${dropping ? " dropping" : ""}`} aria-label="New clip"
      onSubmit={(e) => { e.preventDefault(); submit(); }}>
      {open && <Params composer={composer} onClose={() => setOpen(false)} />}
      {chips.length > 0 && (
        <ul className="chips" aria-label="Attachments (in the order the model reads them)">
          {chips.map((c, i) => <ChipView key={c.key} chip={c} index={i} composer={composer} dragKey={dragKey} />)}
        </ul>
      )}
      {(p.summary || composer.switched) && (
        <p className="plan" role="status">{[composer.switched, p.summary].filter(Boolean).join(" ")}</p>
      )}
      <textarea
        ref={composer.textarea}
        className="prompt"
        aria-label="Prompt"
        placeholder="Describe a clip… (drop, paste or attach images, video, audio)"
        rows={Math.min(8, Math.max(1, prompt.split("\n").length))}
        value={prompt}
        onChange={(e) => setPrompt(e.target.value)}
        onKeyDown={(e) => {
          if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) {
            e.preventDefault();
            submit();
          }
        }}
        onPaste={(e) => {
          const fs = [...e.clipboardData.files];
          if (fs.length) {
            e.preventDefault();
            composer.addFiles(fs);
          }
        }}
      />
      <div className="composer-row">
        <button type="button" className="icon-btn" aria-label="Attach images, video or audio" title="Attach"
          onClick={() => fileInput.current?.click()}>
          <Icon name="attach" />
        </button>
        <input ref={fileInput} type="file" multiple accept="image/*,video/*,audio/*" hidden aria-label="Files to attach"
          onChange={(e) => { composer.addFiles([...(e.target.files ?? [])]); e.target.value = ""; }} />
        <button type="button" className={`btn ghost params-toggle${open ? " on" : ""}`} aria-expanded={open}
          aria-haspopup="dialog" aria-label={`Parameters: ${summary(settings)}`} onClick={() => setOpen((x) => !x)}>
          <Icon name="sliders" /> <span className="params-summary">{summary(settings)}</span>
        </button>
        <span className="spacer" />
        <button type="submit" className="btn primary" disabled={sending} aria-label="Generate" title="Ctrl/⌘ + Enter">
          <Icon name="up" /> Generate <kbd>⌘↵</kbd>
        </button>
      </div>
      {error && <p className="error-text" role="alert">{error}</p>}
      {dropping && <div className="drop-hint" aria-hidden="true">Drop to attach</div>}
    </form>
  );
}
