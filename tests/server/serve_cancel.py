"""h3 serve: cancel in the middle of a many-step job.  The job stops within one step of the DELETE
(the step it was on when the DELETE was sent, at most one more), leaves no file, and the next job runs;
cancelling a queued job; SIGTERM during a job puts it back in the queue and it completes after a
restart."""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from h3srv import Checks, EventListener, Server, need_binary  # noqa: E402

need_binary()
t = Checks("cancel")
srv = Server()
LONG = {"prompt": "a long slow river", "size": "256x256", "num_frames": 73, "num_inference_steps": 300, "seed": 1}
try:
    ev = EventListener(srv)
    ev.start()
    ev.ready.wait(10)
    st, _, a = srv.post("/v1/videos", LONG)
    st2, _, b = srv.post("/v1/videos", {"prompt": "the next one", "seed": 2})
    st3, _, c = srv.post("/api/ai/queue", {"prompt": "cancelled while queued", "seed": 3})
    t.ok(st == 200 and st2 == 200 and st3 == 201, "three jobs queued")
    # cancel a queued job: at once
    st, _, cq = srv.request("DELETE", "/api/ai/queue/" + c["id"])
    t.ok(st == 200 and cq["status"] == "cancelled", "DELETE a queued job: cancelled at once", cq)

    # wait until the long job is a few steps in, as its events tell
    seen, t0 = 0, time.time()
    while time.time() - t0 < 120:
        steps = [e[2]["step"] for e in ev.snapshot() if e[2].get("id") == a["id"] and e[2].get("phase") == "denoise"]
        seen = max(steps) if steps else 0
        if seen >= 5:
            break
        time.sleep(0.01)
    t.ok(seen >= 5, "the long job reaches step 5", seen)
    t_del = time.time()
    st, _, d = srv.request("DELETE", "/v1/videos/" + a["id"])
    dt = time.time() - t_del
    t.ok(st == 200 and d["status"] == "cancelled" and d["error"]["code"] == "cancelled", "DELETE: cancelled", (st, d))
    t.ok(d["step"] <= seen + 1, "stopped within one step (at step %d; %d when the DELETE was sent)" % (d["step"], seen),
         d)
    t.ok(d["step"] < 299, "long before its end", d["step"])
    print("     cancel took %.3f s (%d steps done of %d)" % (dt, d["step"], d["total_steps"]))
    t.ok(not [f for f in os.listdir(os.path.join(srv.outputs, "videos")) if f.startswith(a["id"])],
         "no file of the cancelled job", os.listdir(os.path.join(srv.outputs, "videos")))
    st, _, e = srv.get("/v1/videos/%s/content" % a["id"])
    t.ok(st == 409, "its content: 409 (not completed)", (st, e))
    bd = srv.wait_job(b["id"])
    t.ok(bd and bd["status"] == "completed", "the next job runs and completes", bd)
    st, _, cq = srv.get("/v1/videos/" + c["id"])
    t.ok(cq["status"] == "cancelled" and cq["started_at"] is None, "the job cancelled while queued never ran", cq)
    hist = [h["status"] for h in srv.get("/api/ai/queue/" + a["id"])[2]["history"]]
    t.ok(hist == ["queued", "in_progress", "cancelled"], "history of the cancelled job", hist)
    # a cancelled job can be deleted afterwards
    st, _, d = srv.request("DELETE", "/v1/videos/" + a["id"])
    t.ok(st == 200 and d.get("deleted") is True, "DELETE again: deleted", d)

    # SIGTERM in the middle of a job: it goes back to the queue and completes after a restart
    LONG2 = dict(LONG, num_inference_steps=40, prompt="interrupted by SIGTERM")
    st, _, g = srv.post("/v1/videos", LONG2)
    t0 = time.time()
    while time.time() - t0 < 60:
        st, _, gj = srv.get("/v1/videos/" + g["id"])
        if gj["status"] == "in_progress" and gj["step"] >= 2:
            break
        time.sleep(0.02)
    ev.stop()
    t_stop = time.time()
    rc = srv.stop()
    t.ok(rc == 0, "SIGTERM during a job: exit 0 in %.2f s" % (time.time() - t_stop), (rc, srv.logtext()[-1500:]))
    srv.start()
    st, _, gj = srv.get("/v1/videos/" + g["id"])
    t.ok(st == 200 and gj["status"] in ("queued", "in_progress"), "after the restart it is queued again", gj)
    gd = srv.wait_job(g["id"])
    t.ok(gd and gd["status"] == "completed", "and completes", gd)
    hist = [h["status"] for h in srv.get("/api/ai/queue/" + g["id"])[2]["history"]]
    t.ok(hist == ["queued", "in_progress", "queued", "in_progress", "completed"], "its history says so", hist)
    rc = srv.stop()
    t.ok(rc == 0, "SIGTERM when idle: exit 0", rc)
finally:
    srv.cleanup()
t.finish(17)
