// The h3 serve API as the gallery uses it (docs/HTTP.md): the queue routes, uploads, the event stream.
// Every call carries the API key kept in this browser (Settings), when there is one.

export type Status = "queued" | "in_progress" | "completed" | "failed" | "cancelled";
export type Rating = "approved" | "rejected" | null;

export interface InputMedium {
  role: "first_frame" | "last_frame" | "reference" | "reference_audio";
  type: "image" | "video" | "silent_video" | "audio";
  id: string;
  kind: "image" | "video" | "audio" | null;
  url: string | null;
  poster_url: string | null;
}

export interface Job {
  id: string;
  status: Status;
  progress: number;
  created_at: number | null;
  started_at: number | null;
  completed_at: number | null;
  prompt: string | null;
  seconds: string;
  size: string;
  seed: string; // always text here: seeds run to 2^64 (parse() keeps the digits)
  num_frames: number;
  num_inference_steps: number;
  error: { code: string; message: string } | null;
  phase: string | null;
  step: number;
  total_steps: number;
  eta_s: number | null;
  rating: Rating;
  video_url: string | null;
  file_url: string | null;
  thumbnail_url: string | null;
  input_media?: InputMedium[];
  // GET /api/ai/queue/{id} only
  params?: Record<string, unknown> | null;
  inputs?: Record<string, unknown> | null;
  resolved_params?: Record<string, unknown> | null;
  timings?: Record<string, number | boolean> | null;
  history?: { at: number; status: Status; note: string | null }[] | null;
}

export interface JobPage { items: Job[]; total: number; limit: number; offset: number; has_more: boolean }

export interface Upload {
  id: string;
  kind: "image" | "video" | "audio";
  mime: string;
  bytes: number;
  width: number;
  height: number;
  duration: number;
  url: string;
  poster_url: string | null;
  filename: string | null;
}

export interface ServerStatus {
  model: string;
  toy: boolean;
  device: string;
  queue: Record<Status, number>;
  limits: { max_upload_bytes: number; max_body_bytes: number; max_queue: number };
}

/** An answer of the server that is not 2xx: its message (OpenAI's error shape) and the field it names. */
export class ApiError extends Error {
  constructor(public status: number, message: string, public param: string | null = null) {
    super(message);
  }
}

const KEY = "h3.apiKey";
export const apiKey = {
  get: (): string => localStorage.getItem(KEY) || "",
  set: (k: string) => (k ? localStorage.setItem(KEY, k) : localStorage.removeItem(KEY)),
};

export function authHeaders(extra: Record<string, string> = {}): Record<string, string> {
  const k = apiKey.get();
  return k ? { Authorization: "Bearer " + k, ...extra } : extra;
}

/** JSON.parse that keeps big seeds exact: a number under "seed" becomes its source text (Chromium's
 * JSON.parse source access), any seed a string. */
export function parse<T>(text: string): T {
  type Ctx = { source?: string };
  return JSON.parse(text, ((key: string, value: unknown, ctx?: Ctx) =>
    key === "seed" && typeof value === "number" ? (ctx?.source ?? String(value)) : value) as never) as T;
}

async function call<T>(method: string, path: string, body?: unknown): Promise<T> {
  let r: Response;
  try {
    r = await fetch(path, {
      method,
      headers: authHeaders(body !== undefined && !(body instanceof FormData) ? { "Content-Type": "application/json" } : {}),
      body: body === undefined ? undefined : body instanceof FormData ? body : JSON.stringify(body),
    });
  } catch {
    throw new ApiError(0, "the server cannot be reached");
  }
  const text = await r.text();
  if (!r.ok) {
    let msg = `${r.status} ${r.statusText}`, param: string | null = null;
    try {
      const e = parse<{ error?: { message?: string; param?: string | null } }>(text).error;
      if (e?.message) msg = e.message;
      param = e?.param ?? null;
    } catch { /* not JSON */ }
    throw new ApiError(r.status, msg, param);
  }
  return parse<T>(text);
}

export interface ListQuery { status?: Status[]; search?: string; limit?: number; offset?: number }

export const api = {
  list(q: ListQuery): Promise<JobPage> {
    const u = new URLSearchParams();
    if (q.status?.length) u.set("status", q.status.join(","));
    if (q.search) u.set("search", q.search);
    u.set("limit", String(q.limit ?? 30));
    u.set("offset", String(q.offset ?? 0));
    return call("GET", "/api/ai/queue?" + u.toString());
  },
  get: (id: string): Promise<Job> => call("GET", "/api/ai/queue/" + encodeURIComponent(id)),
  create: (req: Record<string, unknown>): Promise<Job> => call("POST", "/api/ai/queue", req),
  rate: (id: string, rating: Rating): Promise<Job> =>
    call("PATCH", "/api/ai/queue/" + encodeURIComponent(id), { rating }),
  remove: (id: string): Promise<{ id: string; deleted?: boolean; status?: Status }> =>
    call("DELETE", "/api/ai/queue/" + encodeURIComponent(id)),
  upload(files: File[]): Promise<{ uploads: Upload[] }> {
    const f = new FormData();
    files.forEach((x, i) => f.append("file" + i, x, x.name));
    return call("POST", "/api/images", f);
  },
  status: (): Promise<ServerStatus> => call("GET", "/api/status"),
};

/** A URL the browser can load for a file of the server: the path itself without a key; with a key, the
 * file fetched with it and shown from a blob (media elements cannot send headers). */
const blobs = new Map<string, Promise<string>>();
export function mediaUrl(path: string): Promise<string> {
  if (!apiKey.get()) return Promise.resolve(path);
  let p = blobs.get(path);
  if (!p) {
    p = fetch(path, { headers: authHeaders() }).then(async (r) => {
      if (!r.ok) throw new ApiError(r.status, "cannot load " + path);
      return URL.createObjectURL(await r.blob());
    });
    p.catch(() => blobs.delete(path));
    blobs.set(path, p);
  }
  return p;
}
