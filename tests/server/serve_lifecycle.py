"""h3 serve: a job's whole life through both route families on the toy model: enqueue, events up to
completion, the content (an MP4 ffprobe reads as H.264 + AAC) and its thumbnail, list (cursor and
offset paging), search, rating, uploads (image; video with a poster), keyframe jobs (fl2va, the keyframe
cache, a refused aspect), delete,
OpenAPI, status, the app shell, SIGTERM."""
import gzip
import json
import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from h3srv import Checks, EventListener, Server, ffprobe_streams, multipart, need_binary  # noqa: E402



def png_rgb(w, h):
    """An 8-bit RGB PNG of a gradient (standard library only)."""
    import struct
    import zlib
    raw = b"".join(b"\0" + bytes((x * 7 + y * 3 + c * 50) % 256 for x in range(w) for c in range(3)) for y in range(h))

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


need_binary()
t = Checks("lifecycle")
srv = Server()
try:
    ev = EventListener(srv)
    ev.start()
    ev.ready.wait(10)

    # 1. the OpenAI family: POST /v1/videos (JSON), events up to completion
    st, _, a = srv.post("/v1/videos", {"prompt": "a red fox trotting", "seed": 7, "num_inference_steps": 5,
                                       "model": "sora-2"})
    t.ok(st == 200 and a["object"] == "video" and a["status"] == "queued", "POST /v1/videos -> queued", (st, a))
    t.ok(a.get("seed") == 7 and a.get("size") == "256x256" and a.get("num_inference_steps") == 5,
         "the job object has seed, size, steps", a)
    done = srv.wait_job(a["id"])
    t.ok(done and done["status"] == "completed" and done["progress"] == 100, "completed, progress 100", done)
    time.sleep(0.3)
    mine = [e for e in ev.snapshot() if e[1] == "generation_update" and e[2]["id"] == a["id"]]
    statuses = [e[2]["status"] for e in mine]
    t.ok(statuses[:1] == ["queued"] and "in_progress" in statuses and statuses[-1] == "completed",
         "events: queued -> in_progress -> completed", statuses)
    prog = [e[2]["progress"] for e in mine]
    t.ok(prog == sorted(prog), "progress only grows in the events", prog)
    steps = [(e[2]["step"], e[2]["total_steps"]) for e in mine if e[2]["phase"] == "denoise"]
    t.ok((4, 4) in steps and any(s[0] == 1 for s in steps), "denoise step/total in the events (1..4 of 4)", steps)
    t.ok(any(e[2]["eta_s"] is not None for e in mine if e[2]["phase"] == "denoise"), "ETA while denoising")
    phases = []
    for e in mine:
        if e[2]["phase"] and (not phases or phases[-1] != e[2]["phase"]):
            phases.append(e[2]["phase"])
    t.ok(phases[:1] == ["resolve"] and "denoise" in phases and phases[-1] == "write", "phases in order", phases)
    ids = [e[0] for e in ev.snapshot()]
    t.ok(ids == list(range(ids[0], ids[0] + len(ids))), "event ids increase by one", ids[:5])

    st, hd, mp4 = srv.get("/v1/videos/%s/content" % a["id"], raw=True)
    path = os.path.join(srv.dir, "a.mp4")
    with open(path, "wb") as f:
        f.write(mp4)
    t.ok(st == 200 and hd.get("content-type") == "video/mp4", "GET content: video/mp4", (st, hd))
    streams = ffprobe_streams(path)
    t.ok(("video", "h264") in streams and ("audio", "aac") in streams, "ffprobe: H.264 + AAC", streams)
    st, hd, rng = srv.get("/v1/videos/%s/content" % a["id"], raw=True, headers={"Range": "bytes=0-99"})
    t.ok(st == 206 and rng == mp4[:100] and hd.get("content-range", "").startswith("bytes 0-99/"), "Range: 206")
    st, hd, png = srv.get("/v1/videos/%s/content?variant=thumbnail" % a["id"], raw=True)
    t.ok(st == 200 and png[:8] == b"\x89PNG\r\n\x1a\n", "variant=thumbnail: a PNG", (st, png[:8]))

    # 2. the queue family: POST /api/ai/queue, polled
    st, _, b = srv.post("/api/ai/queue", {"prompt": "a blue whale singing", "num_inference_steps": 3, "seed": 11})
    t.ok(st == 201 and b["status"] in ("queued", "in_progress") and "params" in b, "POST /api/ai/queue -> 201", (st, b))
    bd = srv.wait_job(b["id"], prefix="/api/ai/queue/")
    t.ok(bd and bd["status"] == "completed", "the queue job completes", bd)
    t.ok(bd and bd["params"].get("seed") == 11 and bd["resolved_params"].get("steps") == 3
         and "output" not in bd["resolved_params"], "params and resolved params (no server path)", bd and bd["resolved_params"])
    t.ok(bd and bd["timings"].get("denoise", 0) > 0 and bd["timings"].get("total_s", 0) > 0, "per-phase timings",
         bd and bd["timings"])
    hist = [h["status"] for h in (bd or {}).get("history", [])]
    t.ok(hist == ["queued", "in_progress", "completed"], "status history", hist)
    st, _, f = srv.get(bd["file_url"], raw=True)
    t.ok(st == 200 and f[4:8] == b"ftyp", "GET /api/files/videos/...mp4", st)

    # a rerun of the resolved params is the same clip (same seed, same request)
    st, _, c = srv.post("/api/ai/queue", bd["resolved_params"])
    cd = srv.wait_job(c["id"], prefix="/api/ai/queue/") if st == 201 else None
    st1, _, f1 = srv.get(bd["file_url"], raw=True)
    st2, _, f2 = srv.get(cd["file_url"], raw=True) if cd else (0, None, b"")
    t.ok(cd and cd["seed"] == 11 and f1 == f2, "the resolved params rerun exactly (identical MP4)", (st, cd))

    # 3. lists: cursor paging (OpenAI), offset paging, status, search
    st, _, l1 = srv.get("/v1/videos?limit=1")
    t.ok(st == 200 and l1["object"] == "list" and len(l1["data"]) == 1 and l1["has_more"], "list limit=1: has_more", l1)
    st, _, l2 = srv.get("/v1/videos?limit=5&after=" + l1["last_id"])
    t.ok(st == 200 and len(l2["data"]) == 2 and l1["data"][0]["id"] not in [x["id"] for x in l2["data"]]
         and not l2["has_more"], "after= the cursor: the rest", l2)
    st, _, la = srv.get("/v1/videos?order=asc")
    t.ok([x["id"] for x in la["data"]][:2] == [a["id"], b["id"]], "order=asc: oldest first")
    st, _, q = srv.get("/api/ai/queue?search=WHALE")
    t.ok(st == 200 and q["total"] == 2 and sorted(x["id"] for x in q["items"]) == sorted([b["id"], c["id"]]),
         "search (case-insensitive)", q)
    st, _, q = srv.get("/api/ai/queue?status=completed&limit=2&offset=2")
    t.ok(st == 200 and q["total"] == 3 and len(q["items"]) == 1 and not q["has_more"], "status + offset paging", q)
    st, _, q = srv.get("/api/ai/queue?search=100%25")
    t.ok(st == 200 and q["total"] == 0, "search with % matches literally", q)

    # 4. rating
    st, _, r = srv.request("PATCH", "/api/ai/queue/" + b["id"], {"rating": "approved"})
    t.ok(st == 200 and r["rating"] == "approved", "PATCH rating approved", r)
    st, _, r = srv.get("/v1/videos/" + b["id"])
    t.ok(r["rating"] == "approved", "the rating is kept")
    st, _, r = srv.request("PATCH", "/api/ai/queue/" + b["id"], {"rating": None})
    t.ok(st == 200 and r["rating"] is None, "PATCH rating null clears it", r)
    st, _, r = srv.request("PATCH", "/api/ai/queue/" + b["id"], {"rating": "great"})
    t.ok(st == 400 and r["error"]["param"] == "rating", "a bad rating: 400 naming it", r)

    # 5. uploads: an image, a video (with a poster); keyframe jobs
    body, ctype = multipart({}, [("file", "thumb.png", png, "image/png"), ("clip", "../../x.mp4", mp4, "video/mp4")])
    st, _, u = srv.post("/api/images", body, headers={"Content-Type": ctype})
    t.ok(st == 201 and [x["kind"] for x in u["uploads"]] == ["image", "video"], "POST /api/images: image + video", u)
    if st == 201:
        vid = u["uploads"][1]
        t.ok(vid["poster_url"] and vid["url"].endswith(".mp4") and vid["filename"] == "x.mp4"
             and vid["id"] in vid["url"], "the server names the files (the client's name shown only)", vid)
        st, _, p = srv.get(vid["poster_url"], raw=True)
        t.ok(st == 200 and p[:4] == b"\x89PNG", "the video's poster frame", st)
        # keyframes (fl2va): the upload ids map to the server's files; the canvas follows the keyframe's aspect
        # (the thumbnail is 256x256: the toy's canvas rule gives 256x256); a second clip from the same keyframe
        # finds it prepared on the engine
        st, _, k = srv.post("/v1/videos", {"prompt": "from a keyframe", "input_reference": u["ids"][0],
                                           "num_inference_steps": 2})
        kd = srv.wait_job(k["id"]) if st == 200 else None
        t.ok(kd and kd["status"] == "completed" and kd["size"] == "256x256", "a keyframe job completes", kd)
        st, _, kq = srv.get("/api/ai/queue/" + k["id"])
        t.ok(st == 200 and kq["inputs"] == {"first_frame": u["ids"][0]}
             and kq["timings"]["keyframes_cached"] is False, "its inputs name the upload; keyframes encoded", kq)
        st, _, k2 = srv.post("/api/ai/queue", {"prompt": "from a keyframe, again", "first_frame": u["ids"][0],
                                               "last_frame": u["ids"][0], "num_inference_steps": 2, "seed": 5})
        kq2 = srv.wait_job(k2["id"], prefix="/api/ai/queue/") if st == 201 else None
        t.ok(kq2 and kq2["status"] == "completed" and kq2["inputs"] == {"first_frame": u["ids"][0],
                                                                         "last_frame": u["ids"][0]},
             "first_frame + last_frame: completes", kq2)
        # the same file as the last keyframe is another fit (cover-cropped), so only the first is cached
        t.ok(kq2 and kq2["timings"]["keyframes_cached"] is False, "a new fit of the same file is prepared", kq2)
        # (diffusers' names this time: image / last_image are the same two slots)
        st, _, k3 = srv.post("/v1/videos", {"prompt": "third", "image": u["ids"][0],
                                            "last_image": u["ids"][0], "num_inference_steps": 2})
        kd3 = srv.wait_job(k3["id"]) if st == 200 else None
        st, _, kq3 = srv.get("/api/ai/queue/" + k3["id"]) if kd3 else (0, None, None)
        t.ok(kd3 and kd3["status"] == "completed" and kq3["timings"]["keyframes_cached"] is True
             and kq3["inputs"] == {"first_frame": u["ids"][0], "last_frame": u["ids"][0]},
             "image + last_image: the same keyframes again, prepared once (keyframes_cached)", kq3)
        # a keyframe the canvas rule refuses (5:1): 400 naming the field, at once
        body, ctype = multipart({}, [("file", "wide.png", png_rgb(160, 32), "image/png")])
        st, _, wu = srv.post("/api/images", body, headers={"Content-Type": ctype})
        st, _, k = srv.post("/v1/videos", {"prompt": "x", "last_frame": wu["ids"][0]}) if st == 201 else (0, None, {})
        t.ok(st == 400 and k["error"]["param"] == "last_frame" and "aspect ratios" in k["error"]["message"]
             and "160x32" in k["error"]["message"] and srv.dir not in k["error"]["message"],
             "a 5:1 keyframe: 400 naming last_frame (and no server path)", k)
        # an upload h3 cannot read as an image (a GIF: the server takes it, load_image's formats here do not)
        gif = (b"GIF89a\x01\x00\x01\x00\x80\x00\x00\x00\x00\x00\xff\xff\xff!\xf9\x04\x01\x00\x00\x00\x00"
               b",\x00\x00\x00\x00\x01\x00\x01\x00\x00\x02\x02D\x01\x00;")
        body, ctype = multipart({}, [("file", "one.gif", gif, "image/gif")])
        st, _, gu = srv.post("/api/images", body, headers={"Content-Type": ctype})
        if st == 201 and gu["uploads"][0]["kind"] == "image":
            st, _, k = srv.post("/v1/videos", {"prompt": "x", "first_frame": gu["ids"][0]})
            t.ok(st == 400 and k["error"]["param"] == "first_frame" and "upload " + gu["ids"][0] in k["error"]["message"]
                 and srv.dir not in k["error"]["message"], "a GIF keyframe: 400 naming first_frame and the upload", k)
        else:
            t.ok(st in (201, 415), "a GIF upload is refused or kept as an image", (st, gu))
        st, _, k = srv.post("/v1/videos", {"prompt": "x", "input_reference": u["ids"][1]})
        t.ok(st == 400 and k["error"]["param"] == "input_reference", "a video as keyframe: 400", k)
        body, ctype = multipart({"prompt": "a fox from a form", "seconds": "1", "size": "128x128", "model": "sora-2"},
                                [("input_reference", "k.png", png, "image/png")])
        st, _, m = srv.post("/v1/videos", body, headers={"Content-Type": ctype})
        t.ok(st == 200 and m["size"] == "128x128" and m["num_frames"] == 39, "multipart POST /v1/videos", m)

    # 6. delete: the files go, an event says so
    before = len(ev.snapshot())
    st, _, d = srv.request("DELETE", "/v1/videos/" + a["id"])
    t.ok(st == 200 and d == {"id": a["id"], "object": "video.deleted", "deleted": True}, "DELETE a finished job", d)
    st, _, _ = srv.get("/v1/videos/" + a["id"])
    t.ok(st == 404, "then GET: 404")
    t.ok(not os.path.exists(os.path.join(srv.outputs, "videos", a["id"] + ".mp4"))
         and not os.path.exists(os.path.join(srv.outputs, "videos", a["id"] + ".png")), "its MP4 and poster are gone")
    time.sleep(0.3)
    t.ok(any(e[1] == "generation_deleted" and e[2]["id"] == a["id"] for e in ev.snapshot()[before:]),
         "generation_deleted event")
    st, _, d = srv.request("DELETE", "/api/ai/queue/" + b["id"])
    t.ok(st == 200 and d.get("deleted") is True, "DELETE /api/ai/queue/{id}", d)

    # 7. the rest
    st, _, o = srv.get("/openapi.json")
    t.ok(st == 200 and o.get("openapi", "").startswith("3.") and "/v1/videos" in o["paths"]
         and "prompt" in o["components"]["schemas"]["GenerationParams"]["properties"], "GET /openapi.json", st)
    st, _, s = srv.get("/api/status")
    t.ok(st == 200 and s["toy"] and "queue" in s and any(m["name"] == "transformer" and m["open"] for m in s["resident"])
         and s["host_rss"] > 0, "GET /api/status: resident models, queue, memory", s)
    st, hd, html = srv.get("/g/" + b["id"], raw=True)
    t.ok(st == 200 and hd["content-type"].startswith("text/html") and b'name="h3-ui"' in html,
         "GET /g/{id}: the web UI's page (or the page saying it was not built)")
    st, hd, html2 = srv.get("/", raw=True)
    t.ok(st == 200 and html2 == html and hd.get("cache-control") == "no-store", "GET /: the same page, not cached")
    built = b'content="built"' in html
    t.ok(srv.get("/api/status")[2].get("web_ui") is built, "/api/status says whether the UI is built in")
    assets = re.findall(rb'(?:src|href)="(/assets/[^"]+)"', html)
    t.ok(not built or len(assets) >= 2, "the built page loads its assets", assets)
    for a in assets:
        st, hd, body = srv.get(a.decode(), raw=True)
        t.ok(st == 200 and "immutable" in hd.get("cache-control", "") and len(body) > 0 and
             hd["content-type"].split(";")[0] in ("text/javascript", "text/css"), "GET " + a.decode(), (st, hd))
        st, hz, zbody = srv.request("GET", a.decode(), headers={"Accept-Encoding": "br, gzip;q=0.8"}, raw=True)
        t.ok(st == 200 and hz.get("content-encoding") == "gzip" and gzip.decompress(zbody) == body,
             "GET " + a.decode() + " gzipped for a client that takes gzip", hz)
    st, hd, _ = srv.get("/assets/nope.js", raw=True)
    t.ok(st == 404, "an unknown asset: 404")
    ev.stop()
    t.ok(not ev.errors, "the event stream had no errors", ev.errors)
    rc = srv.stop()
    t.ok(rc == 0, "SIGTERM: exit 0", (rc, srv.logtext()[-2000:]))
finally:
    srv.cleanup()
t.finish(45)
