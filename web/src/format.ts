// Small text helpers of the gallery.
import type { Job, Status } from "./api";

export const FPS = 24;

export const statusLabel: Record<Status, string> = {
  queued: "Queued",
  in_progress: "Generating",
  completed: "Completed",
  failed: "Failed",
  cancelled: "Cancelled",
};

export const inFlight = (j: Job) => j.status === "queued" || j.status === "in_progress";

/** Frames on the model's grid: 17n + 5. */
export const gridFrames = (n: number) => 17 * n + 5;

export function seconds(frames: number): string {
  return (frames / FPS).toFixed(2).replace(/\.?0+$/, "");
}

export function phaseText(j: Job): string {
  if (j.status === "queued") return "Queued";
  if (j.status !== "in_progress") return statusLabel[j.status];
  let t = j.phase ? j.phase[0].toUpperCase() + j.phase.slice(1) : "Starting";
  if (j.phase === "denoise" && j.total_steps) t += ` ${j.step}/${j.total_steps}`;
  if (j.eta_s !== null && j.eta_s !== undefined && j.eta_s > 0) t += ` · ${Math.ceil(j.eta_s)} s left`;
  return t;
}

export function ago(t: number | null): string {
  if (!t) return "";
  const s = Math.max(0, Date.now() / 1000 - t);
  if (s < 60) return "just now";
  if (s < 3600) return `${Math.floor(s / 60)} min ago`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ago`;
  return new Date(t * 1000).toLocaleDateString();
}

export function secs(x: number): string {
  return x < 0.01 ? "<0.01 s" : x < 10 ? `${x.toFixed(2)} s` : `${x.toFixed(1)} s`;
}
