"""h3 serve fleet: a server killed with kill -9 in the middle of a job.  Its lease expires, another
server requeues the job and completes it; no job is lost and none completes twice (checked over the
store, the histories and the shared outputs folder); the killed server, restarted, takes work again."""
import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from h3srv import Checks, need_binary  # noqa: E402
from fleet import QUICK, Fleet  # noqa: E402

need_binary()
t = Checks("fleet_kill")
f = Fleet(2, lease=4, heartbeat=1)
LONG = {"prompt": "killed in the middle", "size": "256x256", "num_frames": 41, "num_inference_steps": 60, "seed": 5}
try:
    a, b = f.servers
    st, _, long_job = a.post("/v1/videos", LONG)
    lid = long_job["id"]
    # wait until some server runs it past a few steps; the other one is the survivor
    runner = -1
    t0 = time.time()
    while time.time() - t0 < 120:
        rows = {r[0]: r for r in f.store_rows()}
        j = a.get("/v1/videos/" + lid)[2]
        if j["status"] == "in_progress" and j["step"] >= 3 and rows.get(lid) and rows[lid][4]:
            runner = f.server_of_worker(rows[lid][4])
            break
        time.sleep(0.05)
    t.ok(runner >= 0, "the long job runs on one of the servers", runner)
    victim, survivor = f.servers[runner], f.servers[1 - runner]
    ids = []
    for i in range(4):  # queued behind it, through both servers
        st, _, j = f.servers[i % 2].post("/api/ai/queue", dict(QUICK, prompt="behind the long one %d" % i, seed=20 + i))
        ids.append(j["id"])
    os.kill(victim.proc.pid, signal.SIGKILL)
    victim.proc.wait()
    killed_at = time.time()
    t.ok(True, "kill -9 of the server running it (pid %d)" % victim.proc.pid)
    done = f.wait_all(survivor, [lid] + ids, timeout=400)
    t.ok(done.get(lid, {}).get("status") == "completed", "the long job completed elsewhere",
         done.get(lid, {}).get("status"))
    t.ok(all(done.get(i, {}).get("status") == "completed" for i in ids), "the jobs queued behind it completed",
         [done.get(i, {}).get("status") for i in ids])
    hist = [(h["status"], h.get("note") or "") for h in survivor.get("/api/ai/queue/" + lid)[2]["history"]]
    names = [h[0] for h in hist]
    t.ok(names == ["queued", "in_progress", "queued", "in_progress", "completed"],
         "its history: claimed, requeued after the lease, claimed again, completed", hist)
    t.ok(any("lease" in n and "expired" in n for s, n in hist if s == "queued"), "the requeue says why", hist)
    req = [h for h in survivor.get("/api/ai/queue/" + lid)[2]["history"] if h["status"] == "queued"][-1]
    t.ok(req["at"] - killed_at > 2.0, "requeued only after the lease ran out (%.1f s after the kill)"
         % (req["at"] - killed_at))
    rows = {r[0]: r for r in f.store_rows()}
    t.ok(rows[lid][1:4] == ["completed", "2", "1"], "the store: completed, two attempts, one expiry", rows[lid])
    t.ok(all(rows[i][1:4] == ["completed", "1", "0"] for i in ids), "the others: one attempt each")
    comp = f.sql("SELECT count(*) FROM job_history WHERE status = 'completed'").strip()
    t.ok(comp == "5", "five completions in all the histories, for five jobs", comp)
    vids = sorted(x for x in os.listdir(os.path.join(f.outputs, "videos")) if x.endswith(".mp4"))
    mine = [v for v in vids if v.startswith(lid)]
    t.ok(mine == [lid + "-r2.mp4"], "one video of the long job: the second attempt's", mine)
    t.ok(sorted(vids) == sorted([lid + "-r2.mp4"] + [i + ".mp4" for i in ids]), "one video per job", vids)
    jl = survivor.get("/v1/videos/" + lid)[2]
    st, _, data = survivor.get(jl["video_url"], raw=True)
    t.ok(st == 200 and len(data) > 1000, "its video is served", st)
    # the killed server comes back and works again
    victim.start()
    st, _, j = victim.post("/v1/videos", dict(QUICK, prompt="after the comeback", seed=99))
    d = f.wait_all(victim, [j["id"]], timeout=120)
    t.ok(d.get(j["id"], {}).get("status") == "completed", "after its restart the fleet takes new work")
    # cancel and delete from the server that does not run the job
    st, _, c = a.post("/v1/videos", dict(LONG, prompt="cancelled from the other server"))
    runner = -1
    t0 = time.time()
    while time.time() - t0 < 120 and runner < 0:
        rows = {r[0]: r for r in f.store_rows()}
        if rows.get(c["id"]) and rows[c["id"]][1] == "in_progress" and rows[c["id"]][4]:
            runner = f.server_of_worker(rows[c["id"]][4])
        time.sleep(0.05)
    other = f.servers[1 - runner] if runner >= 0 else a
    t0 = time.time()
    st, _, d = other.request("DELETE", "/api/ai/queue/" + c["id"])
    cd = f.wait_all(other, [c["id"]], timeout=60).get(c["id"], {})
    t.ok(runner >= 0 and cd.get("status") == "cancelled" and time.time() - t0 < 10,
         "a running job cancelled through the other server stops within seconds (%.1f s)" % (time.time() - t0),
         (runner, st, cd.get("status")))
    t.ok(not [v for v in os.listdir(os.path.join(f.outputs, "videos")) if v.startswith(c["id"])],
         "the cancelled job left no file")
    owner = f.started_by().get(ids[0], [0])[0]
    st, _, d = f.servers[1 - owner].request("DELETE", "/api/ai/queue/" + ids[0])
    t.ok(st == 200 and not os.path.exists(os.path.join(f.outputs, "videos", ids[0] + ".mp4"))
         and f.servers[owner].get("/api/ai/queue/" + ids[0])[0] == 404,
         "a completed job deleted through the server that did not run it: gone everywhere, its files too", st)
    codes = [s.stop() for s in f.servers]
    t.ok(codes == [0, 0], "both stop cleanly", codes)
finally:
    f.cleanup()
t.finish(17)
