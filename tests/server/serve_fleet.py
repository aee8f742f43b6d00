"""h3 serve fleet: three servers on one PostgreSQL store and one outputs folder.  30 jobs enqueued
through different servers (both APIs) all complete exactly once (one claim, one completion in each
history, one video each); the history is the same from every server; every server's event stream
carries the completions of jobs the other servers ran."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from h3srv import Checks, EventListener, need_binary  # noqa: E402
from fleet import QUICK, Fleet  # noqa: E402

need_binary()
t = Checks("fleet")
f = Fleet(3)
try:
    ls = [EventListener(s) for s in f.servers]
    for x in ls:
        x.start()
    for x in ls:
        x.ready.wait(30)
    ids = []
    for i in range(30):
        s = f.servers[i % 3]
        body = dict(QUICK, prompt="fleet clip %d" % i, seed=100 + i)
        st, _, j = s.post("/v1/videos" if i % 2 else "/api/ai/queue", body)
        if st in (200, 201) and "id" in j:
            ids.append(j["id"])
    t.ok(len(ids) == 30, "30 jobs enqueued through three servers", len(ids))
    done = f.wait_all(f.servers[0], ids, timeout=400)
    t.ok(len(done) == 30 and all(j["status"] == "completed" for j in done.values()), "all 30 completed",
         {i: j["status"] for i, j in done.items() if j["status"] != "completed"} or len(done))
    rows = f.store_rows()
    t.ok(len(rows) == 30 and all(r[1] == "completed" and r[2] == "1" and r[3] == "0" and r[4] == "" for r in rows),
         "the store: 30 completed, each claimed once, no lease left", [r for r in rows if r[2] != "1"][:3])
    hist = f.sql("SELECT j.id, h.status, count(*) FROM job_history h JOIN jobs j ON j.seq = h.job_seq "
                 "GROUP BY j.id, h.status")
    per = {}
    for line in hist.splitlines():
        jid, status, n = line.split("\t")
        per.setdefault(jid, {})[status] = int(n)
    t.ok(all(per.get(i) == {"queued": 1, "in_progress": 1, "completed": 1} for i in ids),
         "every history: queued, in_progress, completed once each",
         [per.get(i) for i in ids if per.get(i) != {"queued": 1, "in_progress": 1, "completed": 1}][:3])
    runs = f.started_by()
    t.ok(all(len(runs.get(i, [])) == 1 for i in ids), "every job was started by exactly one server",
         {i: runs.get(i) for i in ids if len(runs.get(i, [])) != 1})
    by_server = [sum(1 for i in ids if runs.get(i) == [k]) for k in range(3)]
    t.ok(sum(1 for n in by_server if n > 0) >= 2, "the jobs were shared out (jobs per server %s)" % by_server,
         by_server)
    vids = sorted(x for x in os.listdir(os.path.join(f.outputs, "videos")) if x.endswith(".mp4"))
    t.ok(vids == sorted(i + ".mp4" for i in ids), "one video per job in the shared outputs", len(vids))
    t.ok(all(os.path.getsize(os.path.join(f.outputs, "videos", v)) > 0 for v in vids), "no empty video")
    # the same history from every server
    views = []
    for s in f.servers:
        st, _, l = s.get("/api/ai/queue?limit=100")
        full = [s.get("/api/ai/queue/" + x["id"])[2] for x in l["items"]]
        views.append([(j["id"], j["status"], j["video_url"], j["seed"], [(h["status"], h["at"]) for h in j["history"]])
                      for j in full])
    t.ok(len(views[0]) == 30 and views[0] == views[1] == views[2], "the list and every history are the same from "
         "each server")
    # events: every server streams every completion, with the same ids
    import time
    deadline = time.time() + 20
    def completed_ids(x):
        return {e[2].get("id") for e in x.snapshot() if e[1] == "generation_update" and e[2].get("status") == "completed"}
    while time.time() < deadline and not all(set(ids) <= completed_ids(x) for x in ls):
        time.sleep(0.2)
    for k, x in enumerate(ls):
        t.ok(set(ids) <= completed_ids(x), "server %d's event stream has all 30 completions" % k,
             len(set(ids) & completed_ids(x)))
        ev = [e[0] for e in x.snapshot()]
        t.ok(ev == sorted(ev) and len(ev) == len(set(ev)), "server %d's event ids increase" % k)
    common = set(e[0] for e in ls[0].snapshot()) & set(e[0] for e in ls[1].snapshot())
    a = {e[0]: (e[1], e[2].get("id"), e[2].get("status")) for e in ls[0].snapshot() if e[0] in common}
    b = {e[0]: (e[1], e[2].get("id"), e[2].get("status")) for e in ls[1].snapshot() if e[0] in common}
    t.ok(len(common) > 30 and a == b, "an event id means the same event on every server", len(common))
    for x in ls:
        x.stop()
    codes = [s.stop() for s in f.servers]
    t.ok(codes == [0, 0, 0], "the three servers stop cleanly", codes)
finally:
    f.cleanup()
t.finish(14)
