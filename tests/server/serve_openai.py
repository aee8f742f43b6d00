"""The official OpenAI client (npm `openai`, tests/server/package.json, installed by `npm ci` in .ci/run)
run against h3 serve with an API key: create (multipart), poll, download the content (an MP4 that
ffprobe reads as H.264 + AAC) and thumbnail, list with the client's paging, a typed 404, delete.
Skipped (77) when node or tests/server/node_modules is missing, unless H3_REQUIRE_NODE=1 (CI)."""
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from h3srv import Checks, Server, ffprobe_streams, need_binary  # noqa: E402

need_binary()
here = os.path.dirname(os.path.abspath(__file__))
if not shutil.which("node") or not os.path.isdir(os.path.join(here, "node_modules", "openai")):
    print("node or the openai package is missing (cd tests/server && npm ci)")
    sys.exit(1 if os.environ.get("H3_REQUIRE_NODE") == "1" else 77)
t = Checks("openai")
KEY = "sk-h3-test-key"
srv = Server(key=KEY)
try:
    mp4 = os.path.join(srv.dir, "client.mp4")
    env = dict(os.environ, H3_BASE_URL="http://127.0.0.1:%d" % srv.port, H3_KEY=KEY, H3_MP4_OUT=mp4)
    r = subprocess.run(["node", os.path.join(here, "openai_client.mjs")], capture_output=True, text=True, env=env,
                       timeout=300, cwd=here)
    t.ok(r.returncode == 0, "the client script ran", r.stderr[-3000:])
    out = json.loads(r.stdout.strip().splitlines()[-1]) if r.returncode == 0 else {}
    c = out.get("created", [])
    t.ok(len(c) == 2 and all(x["object"] == "video" and x["status"] == "queued" and x["size"] == "128x128"
                             for x in c), "videos.create (multipart): queued jobs", c)
    t.ok(out.get("final", {}).get("status") == "completed" and out["final"]["progress"] == 100,
         "videos.retrieve polled to completed", out.get("final"))
    t.ok(out.get("content", {}).get("type") == "video/mp4" and out["content"]["ftyp"] == "ftyp",
         "videos.downloadContent: an MP4", out.get("content"))
    streams = ffprobe_streams(mp4) if os.path.exists(mp4) else []
    t.ok(("video", "h264") in streams and ("audio", "aac") in streams, "ffprobe: H.264 + AAC", streams)
    t.ok(out.get("thumbnail", {}).get("png") == "PNG", "variant thumbnail: a PNG", out.get("thumbnail"))
    ids = [x["id"] for x in c] + ["-", "-"]
    ids = ids[:2]
    t.ok(out.get("listed") == ids[::-1],
         "videos.list pages through every job (newest first, limit 1)", out.get("listed"))
    t.ok(out.get("first_page") == {"ids": ids[:1], "has_more": True}, "order asc, has_more", out.get("first_page"))
    t.ok(out.get("not_found") == {"status": 404, "name": "NotFoundError"},
         "an unknown id: the client's NotFoundError", out.get("not_found"))
    t.ok(out.get("deleted") == {"id": ids[1], "object": "video.deleted", "deleted": True},
         "videos.delete", out.get("deleted"))
    # the same client with the wrong key is refused
    env["H3_KEY"] = "wrong"
    r = subprocess.run(["node", os.path.join(here, "openai_client.mjs")], capture_output=True, text=True, env=env,
                       timeout=120, cwd=here)
    t.ok(r.returncode != 0 and ("401" in r.stderr or "AuthenticationError" in r.stderr), "a wrong key: 401",
         r.stderr[-500:])
    t.ok(srv.stop() == 0, "SIGTERM: exit 0")
finally:
    srv.cleanup()
t.finish(12)
