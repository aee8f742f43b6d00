// A frame-precise player: the readout is the frame on screen (requestVideoFrameCallback's mediaTime, so
// it is never a guess from currentTime), and a step seeks to the middle of the frame wanted, so that
// rounding never lands on its neighbour.  ← / → one frame, Shift + ← / → one second, space play / pause,
// l loop, m mute (the keys are the lightbox's: see useKeys there).
import { forwardRef, useCallback, useEffect, useImperativeHandle, useRef, useState } from "react";
import { FPS } from "./format";
import { Icon } from "./Icon";

export interface PlayerHandle {
  step(frames: number): void;
  toggle(): void;
  toggleLoop(): void;
  toggleMute(): void;
}

type VFC = (now: number, md: { mediaTime: number }) => void;
type VideoWithVFC = HTMLVideoElement & {
  requestVideoFrameCallback?(cb: VFC): number;
  cancelVideoFrameCallback?(h: number): void;
};

const MUTE_KEY = "h3.muted";

export const Player = forwardRef<PlayerHandle, { src: string; poster?: string | null; frames: number }>(
  function Player({ src, poster, frames }, ref) {
    const video = useRef<VideoWithVFC>(null);
    const [frame, setFrame] = useState(0);
    const [playing, setPlaying] = useState(false);
    const [loop, setLoop] = useState(true);
    const [muted, setMuted] = useState(() => localStorage.getItem(MUTE_KEY) !== "0");
    const pending = useRef<number | null>(null); // the frame a step asked for, until it is on screen
    const total = Math.max(1, frames);
    const clamp = useCallback((f: number) => Math.max(0, Math.min(total - 1, f)), [total]);

    // the frame on screen
    useEffect(() => {
      const v = video.current;
      if (!v) return;
      let handle = 0;
      const show = (f: number) => {
        setFrame(f);
        if (pending.current === f) pending.current = null;
      };
      if (v.requestVideoFrameCallback) {
        const cb: VFC = (_now, md) => {
          show(clamp(Math.round(md.mediaTime * FPS)));
          handle = v.requestVideoFrameCallback!(cb);
        };
        handle = v.requestVideoFrameCallback(cb);
        const onSeeked = () => { pending.current = null; };
        v.addEventListener("seeked", onSeeked);
        return () => {
          v.cancelVideoFrameCallback?.(handle);
          v.removeEventListener("seeked", onSeeked);
        };
      }
      const on = () => show(clamp(Math.floor(v.currentTime * FPS + 1e-4))); // no rVFC: the nearest guess
      v.addEventListener("timeupdate", on);
      v.addEventListener("seeked", on);
      return () => {
        v.removeEventListener("timeupdate", on);
        v.removeEventListener("seeked", on);
      };
    }, [src, clamp]);

    useEffect(() => {
      const v = video.current;
      if (!v) return;
      v.muted = muted;
      v.play().catch(() => { /* autoplay refused (sound without a gesture): it stays paused */ });
    }, [src]); // eslint-disable-line react-hooks/exhaustive-deps

    const seekTo = (f: number) => {
      const v = video.current;
      if (!v) return;
      const t = clamp(f);
      pending.current = t;
      v.currentTime = (t + 0.5) / FPS;
    };

    const api: PlayerHandle = {
      step(d) {
        const v = video.current;
        if (!v) return;
        v.pause();
        seekTo((pending.current ?? frame) + d);
      },
      toggle() {
        const v = video.current;
        if (!v) return;
        if (v.paused) v.play().catch(() => {});
        else v.pause();
      },
      toggleLoop() { setLoop((x) => !x); },
      toggleMute() {
        setMuted((x) => {
          localStorage.setItem(MUTE_KEY, x ? "0" : "1");
          return !x;
        });
      },
    };
    useImperativeHandle(ref, () => api);

    useEffect(() => {
      if (video.current) video.current.muted = muted;
    }, [muted]);

    return (
      <div className="player">
        <video
          ref={video}
          className="player-video"
          src={src}
          poster={poster ?? undefined}
          loop={loop}
          playsInline
          preload="auto"
          onPlay={() => setPlaying(true)}
          onPause={() => setPlaying(false)}
          onClick={api.toggle}
          aria-label="Clip"
        />
        <div className="player-bar">
          <button className="icon-btn" onClick={api.toggle} aria-label={playing ? "Pause" : "Play"} title="Space">
            <Icon name={playing ? "pause" : "play"} />
          </button>
          <button className="icon-btn" onClick={() => api.step(-1)} aria-label="Previous frame" title="←">
            <Icon name="prev" />
          </button>
          <button className="icon-btn" onClick={() => api.step(1)} aria-label="Next frame" title="→">
            <Icon name="next" />
          </button>
          <input
            className="scrub"
            type="range"
            min={0}
            max={total - 1}
            step={1}
            value={frame}
            aria-label="Frame position"
            onChange={(e) => { video.current?.pause(); seekTo(Number(e.target.value)); }}
          />
          <output className="readout" aria-label="Frame" data-frame={frame + 1} data-total={total}>
            {frame + 1} / {total}
          </output>
          <span className="readout-time">{(frame / FPS).toFixed(2)} s</span>
          <button className={`icon-btn${loop ? " on" : ""}`} onClick={api.toggleLoop} aria-pressed={loop}
            aria-label="Loop" title="l">
            <Icon name="loop" />
          </button>
          <button className="icon-btn" onClick={api.toggleMute} aria-pressed={muted} aria-label="Mute" title="m">
            <Icon name={muted ? "mute" : "volume"} />
          </button>
        </div>
      </div>
    );
  },
);
