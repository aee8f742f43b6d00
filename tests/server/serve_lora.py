"""h3 serve: LoRAs named from the server's folder (--lora-dir) only.  GET /api/loras lists the folder's
*.safetensors; a job naming one (with a strength) completes, its steps from the LoRA's metadata; paths,
'..', names outside the folder and names of a server without a folder are refused 400 naming the field
`lora`; a bad LoRA file fails its job with a message naming the key, and the next job runs."""
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from h3srv import H3, Checks, Server, need_binary  # noqa: E402

need_binary()
t = Checks("lora")
work = tempfile.mkdtemp(prefix="h3lora.")
toy = os.path.join(work, "toy")
env = dict(os.environ, H3_TOY_DIR=toy)
subprocess.run([H3, "generate", "-q", "-p", "warmup", "-o", ""], env=env, capture_output=True)  # the toy, once
tool = os.path.join(os.environ["H3_SOURCE_DIR"], "tests", "tools", "lora_tool.py")
ldir = os.path.join(work, "loras")
os.makedirs(ldir)
dit = os.path.join(toy, "transformer", "diffusion_pytorch_model.safetensors")
for kind, name in (("good", "style.safetensors"), ("turbo", "turbo-3step.safetensors"), ("shape", "other.safetensors")):
    r = subprocess.run([sys.executable, tool, "make", kind, os.path.join(ldir, name), dit], capture_output=True, text=True)
    t.ok(r.returncode == 0, "lora_tool make " + kind, r.stderr)
open(os.path.join(ldir, "notes.txt"), "w").write("not a LoRA\n")
outside = os.path.join(work, "outside.safetensors")
shutil.copy(os.path.join(ldir, "style.safetensors"), outside)

srv = Server(env={"H3_TOY_DIR": toy}, args=["--lora-dir", ldir])
bare = None
try:
    st, _, b = srv.get("/api/loras")
    names = [x.get("name") for x in b.get("loras", [])] if isinstance(b, dict) else []
    t.ok(st == 200 and b.get("enabled") is True and names == ["other.safetensors", "style.safetensors",
                                                             "turbo-3step.safetensors"],
         "GET /api/loras lists the folder's .safetensors, sorted", (st, b))

    def bad(what, lora, needle):
        st, _, b = srv.post("/v1/videos", {"prompt": "a fox", "lora": lora})
        msg = b.get("error", {}).get("message", "") if isinstance(b, dict) else ""
        t.ok(st == 400 and b["error"].get("param") == "lora" and needle in msg,
             "%s -> 400 lora (%s)" % (what, msg), (st, b))

    bad("an absolute path", [outside], "file name")
    bad("a relative path", ["../outside.safetensors"], "file name")
    bad("'..' in a name", ["..style.safetensors"], "file name")
    bad("a hidden name", [".style.safetensors"], "file name")
    bad("a name not in the folder", ["missing.safetensors:0.5"], "no such file in the LoRA folder")

    st, _, a = srv.post("/v1/videos", {"prompt": "a fox", "seed": 3, "lora": ["style.safetensors:0.7"],
                                       "num_inference_steps": 3})
    t.ok(st == 200 and a.get("status") == "queued", "a job with a LoRA of the folder -> queued", (st, a))
    done = srv.wait_job(a["id"]) if st == 200 else None
    t.ok(done and done["status"] == "completed", "... completed", done)
    st, _, qd = srv.get("/api/ai/queue/" + a["id"])
    rp = (qd or {}).get("resolved_params") or {}
    t.ok(st == 200 and rp.get("lora") == ["style.safetensors:0.7"] and "lora_dir" not in rp,
         "resolved_params name the LoRA by its file name, not the server's folder", rp)
    st, _, again = srv.post("/api/ai/queue", rp)
    done2 = srv.wait_job(again["id"], prefix="/api/ai/queue/") if st == 201 else None
    t.ok(done2 and done2["status"] == "completed", "resolved_params posted back: the same job runs again", (st, again))
    st, _, a = srv.post("/v1/videos", {"prompt": "a fox", "seed": 3, "loras": ["turbo-3step.safetensors"],
                                       "lora_bake": True})
    t.ok(st == 200 and a.get("num_inference_steps") == 3, "`loras`, baked: the steps of the LoRA's metadata (3)",
         (st, a))
    done = srv.wait_job(a["id"]) if st == 200 else None
    t.ok(done and done["status"] == "completed", "... completed", done)
    st, _, a = srv.post("/v1/videos", {"prompt": "a fox", "lora": ["other.safetensors"]})
    done = srv.wait_job(a["id"]) if st == 200 else None
    err = (done or {}).get("error") or {}
    msg = err.get("message", "") if isinstance(err, dict) else str(err)
    t.ok(done and done["status"] == "failed" and "qkv_proj" in msg, "a LoRA for another base: the job fails naming "
         "the module (%s)" % msg, done)
    st, _, a = srv.post("/v1/videos", {"prompt": "a fox", "seed": 4, "num_inference_steps": 2})
    done = srv.wait_job(a["id"]) if st == 200 else None
    t.ok(done and done["status"] == "completed", "the next job (no LoRA) completes", done)
    rc = srv.stop()
    t.ok(rc == 0, "SIGTERM: exit 0", (rc, srv.logtext()[-2000:]))

    bare = Server(env={"H3_TOY_DIR": toy})
    st, _, b = bare.get("/api/loras")
    t.ok(st == 200 and b == {"enabled": False, "loras": []}, "no --lora-dir: /api/loras is empty", (st, b))
    st, _, b = bare.post("/v1/videos", {"prompt": "a fox", "lora": ["style.safetensors"]})
    t.ok(st == 400 and b["error"].get("param") == "lora" and "no LoRA folder" in b["error"]["message"],
         "no --lora-dir: a LoRA -> 400 lora", (st, b))
    st, _, b = bare.post("/v1/videos", {"prompt": "a fox", "lora_dir": ldir})
    t.ok(st == 400 and b["error"].get("param") == "lora_dir", "lora_dir from a client -> 400", (st, b))
    rc = bare.stop()
    t.ok(rc == 0, "SIGTERM: exit 0", (rc, bare.logtext()[-2000:]))
finally:
    srv.cleanup()
    if bare:
        bare.cleanup()
    shutil.rmtree(work, ignore_errors=True)
t.finish(22)
