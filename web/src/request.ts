// Requests from the prompt bar's state, and back: what a job asked for, as the prompt bar's state (edit and
// resubmit) or as a request (rerun).  The fields are the server's (docs/HTTP.md "Request fields").
import type { InputMedium, Job } from "./api";

export type Partition = "auto" | "fl2va" | "ref2va";

export interface Settings {
  frames: number | null; // null: the server's default
  size: string | null; // "WxH"; null: the server's default
  steps: number | null;
  seed: string | null; // null: random; else locked
  audio: boolean;
  partition: Partition;
}

export const defaultSettings: Settings = { frames: null, size: null, steps: null, seed: null, audio: true, partition: "auto" };

export const SIZES = ["1344x768", "768x1344", "1024x768", "768x768", "512x512"];

/** An attachment once uploaded, in the order the model reads it. */
export interface Attached {
  id: string;
  kind: "image" | "video" | "audio";
  pinnedLast: boolean;
}

export interface Plan {
  partition: Partition; // what will run
  fields: Record<string, unknown>;
  summary: string;
  error: string | null;
}

/** The keyframe / reference fields of the attachments under a partition choice: images only go to fl2va
 * (the first unpinned one is the first frame, the pinned one the last); video or audio, or more images
 * than two keyframes, go to ref2va as references in their order. */
export function plan(items: Attached[], choice: Partition): Plan {
  if (!items.length) return { partition: choice, fields: choice === "auto" ? {} : { partition: choice }, summary: "", error: null };
  const av = items.some((a) => a.kind !== "image");
  const unpinned = items.filter((a) => a.kind === "image" && !a.pinnedLast);
  const pinned = items.filter((a) => a.kind === "image" && a.pinnedLast);
  let p: Partition = choice;
  if (p === "auto") p = av || unpinned.length > 1 || pinned.length > 1 ? "ref2va" : "fl2va";
  if (p === "ref2va") {
    const refs = items.map((a) => ({ id: a.id, type: a.kind }));
    const n = items.length;
    return {
      partition: p,
      fields: { partition: "ref2va", references: refs },
      summary: `ref2va · ${n} reference${n > 1 ? "s" : ""}, read in this order`,
      error: null, // the model's own rules on references (counts, audio beside a picture) are the server's to say
    };
  }
  if (av) return { partition: p, fields: {}, summary: "", error: "fl2va takes images only (keyframes): choose ref2va for video or audio" };
  if (unpinned.length > 1 || pinned.length > 1)
    return { partition: p, fields: {}, summary: "", error: "fl2va takes one first frame and one pinned last frame: choose ref2va to use every image as a reference" };
  const fields: Record<string, unknown> = { partition: "fl2va" };
  if (unpinned[0]) fields.image = unpinned[0].id;
  if (pinned[0]) fields.last_image = pinned[0].id;
  const parts = [unpinned[0] && "first frame", pinned[0] && "last frame"].filter(Boolean).join(" + ");
  return { partition: p, fields, summary: `fl2va · ${parts}`, error: null };
}

export function settingsFields(s: Settings): Record<string, unknown> {
  const f: Record<string, unknown> = {};
  if (s.frames !== null) f.frames = s.frames;
  if (s.size) {
    const [w, h] = s.size.split("x").map(Number);
    f.width = w;
    f.height = h;
  }
  if (s.steps !== null) f.steps = s.steps;
  f.seed = s.seed ?? "random";
  if (!s.audio) f.audio = false;
  return f;
}

// request fields of a job's params that are not repeated as they are: its inputs (re-added from
// `inputs`) and what the server chose itself
const NOT_COPIED = new Set(["output", "first_frame", "last_frame", "image", "last_image", "references", "input_reference"]);

/** What the job asked for (its resolved request when it ran: every default filled in), with its inputs. */
export function requestOf(job: Job): Record<string, unknown> {
  const src = (job.resolved_params ?? job.params ?? {}) as Record<string, unknown>;
  const req: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(src)) if (!NOT_COPIED.has(k) && !k.startsWith("ref_")) req[k] = v;
  req.prompt = job.prompt ?? req.prompt;
  const inputs = (job.inputs ?? {}) as { first_frame?: string; last_frame?: string; references?: { id: string; type: string; audio?: string }[] };
  if (inputs.first_frame) req.image = inputs.first_frame;
  if (inputs.last_frame) req.last_image = inputs.last_frame;
  if (inputs.references?.length) req.references = inputs.references;
  return req;
}

/** The prompt bar's settings for a job: its parameters, the seed locked. */
export function settingsOf(job: Job): Settings {
  const p = (job.resolved_params ?? job.params ?? {}) as Record<string, unknown>;
  const part = p.partition === "fl2va" || p.partition === "ref2va" ? (p.partition as Partition) : "auto";
  return {
    frames: job.num_frames || null,
    size: job.size || null,
    steps: job.num_inference_steps || null,
    seed: String(job.seed),
    audio: p.audio !== false,
    partition: part,
  };
}

export function attachedOf(job: Job): { medium: InputMedium; pinnedLast: boolean }[] {
  return (job.input_media ?? [])
    .filter((m) => m.role !== "reference_audio" && m.kind)
    .map((m) => ({ medium: m, pinnedLast: m.role === "last_frame" }));
}
