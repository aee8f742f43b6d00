"""h3 serve: kill -9 during a job, then restart.  The interrupted job is failed ("interrupted"), or
queued again with --requeue-interrupted; the queued ones complete; no half-written file is left; the
database passes PRAGMA integrity_check; every job is accounted for.  On the shared PostgreSQL store
(H3_TEST_STORE=postgresql) the restarted server does not touch the jobs in progress (another server
may run them): the interrupted job's lease expires and it is failed (--requeue-limit 0) or queued again
(the default limit), its half-written files removed, as --requeue-interrupted does on one host."""
import os
import sqlite3
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from h3srv import STORE, Checks, Server, need_binary  # noqa: E402

need_binary()
t = Checks("crash")
PG = STORE == "postgresql"
LEASE = ["--lease", "4", "--heartbeat", "1"]
srv = Server(args=LEASE + ["--requeue-limit", "0"] if PG else ())
LONG = {"prompt": "killed in the middle", "size": "256x256", "num_frames": 73, "num_inference_steps": 200, "seed": 5}


def wait_running(job_id, min_step=2, timeout=120):
    t0 = time.time()
    while time.time() - t0 < timeout:
        st, _, j = srv.get("/v1/videos/" + job_id)
        if st == 200 and j["status"] == "in_progress" and j["step"] >= min_step:
            return j
        time.sleep(0.02)
    return None


def integrity(db):
    if PG:  # PostgreSQL's consistency is its own: the store's rows are checked (every job has a history)
        from h3srv import pg_cluster
        name = srv.args[srv.args.index("--db") + 1].rsplit("/", 1)[1]
        bad = pg_cluster().sql("SELECT count(*) FROM jobs j WHERE NOT EXISTS (SELECT 1 FROM job_history h "
                               "WHERE h.job_seq = j.seq)", db=name).strip()
        return "ok" if bad == "0" else "jobs without a history: " + bad
    c = sqlite3.connect(db)
    try:
        return c.execute("PRAGMA integrity_check").fetchone()[0]
    finally:
        c.close()


try:
    ids = []
    st, _, a = srv.post("/v1/videos", LONG)
    ids.append(a["id"])
    for i in range(3):
        st, _, q = srv.post("/api/ai/queue", {"prompt": "queued behind it %d" % i, "seed": 10 + i})
        ids.append(q["id"])
    t.ok(wait_running(a["id"]) is not None, "the long job is running")
    srv.kill9()
    db = os.path.join(srv.outputs, "h3.db")
    t.ok(integrity(db) == "ok", "after kill -9: PRAGMA integrity_check ok")

    # 1. restart without the flag: the interrupted job failed, the queued ones complete
    srv.start()
    aj = srv.wait_job(a["id"], timeout=60) if PG else srv.get("/v1/videos/" + a["id"])[2]
    t.ok(aj["status"] == "failed" and aj["error"]["code"] == "interrupted", "the interrupted job is failed", aj)
    done = [srv.wait_job(i, timeout=120) for i in ids[1:]]
    t.ok(all(d and d["status"] == "completed" for d in done), "the queued jobs complete after the restart",
         [d and d["status"] for d in done])
    st, _, l = srv.get("/api/ai/queue?limit=200")
    by = {x["id"]: x["status"] for x in l["items"]}
    t.ok(l["total"] == 4 and sorted(by) == sorted(ids), "every job is accounted for", by)
    left = [f for f in os.listdir(os.path.join(srv.outputs, "videos")) if ".tmp." in f or f.startswith(a["id"])]
    t.ok(not left, "no half-written file and no file of the interrupted job", left)
    hist = [h["status"] for h in srv.get("/api/ai/queue/" + a["id"])[2]["history"]]
    t.ok(hist == ["queued", "in_progress", "failed"], "its history ends failed", hist)

    # 2. again, with --requeue-interrupted: it runs again and completes
    st, _, b = srv.post("/v1/videos", dict(LONG, num_inference_steps=30, prompt="requeued after kill -9"))
    st, _, q = srv.post("/v1/videos", {"prompt": "behind the requeued one", "seed": 21})
    t.ok(wait_running(b["id"]) is not None, "the second long job is running")
    srv.kill9()
    t.ok(integrity(db) == "ok", "after the second kill -9: integrity_check ok")
    srv.args = LEASE + [x for x in srv.args if x.startswith("postgresql://") or x == "--db"] if PG else \
        ["--requeue-interrupted"]
    srv.start()
    bd = srv.wait_job(b["id"], timeout=180)
    qd = srv.wait_job(q["id"], timeout=120)
    t.ok(bd and bd["status"] == "completed", "--requeue-interrupted: the interrupted job completes", bd)
    t.ok(qd and qd["status"] == "completed", "and the one queued behind it", qd)
    if PG:  # the one behind it was claimed at the restart, while the interrupted one's lease ran out
        t.ok(bd and qd and bd["completed_at"] >= qd["started_at"], "the interrupted one after its lease ran out")
    else:
        t.ok(bd and qd and bd["completed_at"] <= qd["completed_at"], "in their order")
    hist = [h["status"] for h in srv.get("/api/ai/queue/" + b["id"])[2]["history"]]
    t.ok(hist == ["queued", "in_progress", "queued", "in_progress", "completed"], "its history shows the requeue", hist)
    st, _, s = srv.get("/api/status")
    t.ok(s["queue"] == {"queued": 0, "in_progress": 0, "completed": 5, "failed": 1, "cancelled": 0},
         "status counts: 5 completed, 1 failed", s["queue"])
    rc = srv.stop()
    t.ok(rc == 0, "SIGTERM: exit 0", rc)
    t.ok(integrity(db) == "ok", "after a clean stop: integrity_check ok")
    left = [f for f in os.listdir(os.path.join(srv.outputs, "videos")) if ".tmp." in f]
    t.ok(not left, "no temporary files", left)
finally:
    srv.cleanup()
t.finish(17)
