"""h3 serve fleet: PostgreSQL restarted in the middle of a run.  The two servers answer 503 while it is
away (never crash), reconnect (their pools and their LISTEN connection) and carry on: every job, enqueued
before, during (retried on 503) and after the restart, completes exactly once, and events of jobs run by
one server still reach the other's stream."""
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from h3srv import Checks, EventListener, need_binary  # noqa: E402
from fleet import QUICK, Fleet  # noqa: E402

need_binary()
t = Checks("fleet_pgrestart")
f = Fleet(2, lease=15, heartbeat=1)
try:
    a, b = f.servers
    ids = []
    for i in range(8):
        st, _, j = f.servers[i % 2].post("/api/ai/queue", dict(QUICK, prompt="before the restart %d" % i, seed=i))
        ids.append(j["id"])
    # restart while jobs are queued and running
    t0 = time.time()
    while time.time() - t0 < 60 and sum(1 for r in f.store_rows() if r[1] == "completed") < 2:
        time.sleep(0.1)
    during = []
    answers = []
    stop = threading.Event()

    def enqueue_during():
        k = 0
        while not stop.is_set():
            s = f.servers[k % 2]
            try:
                st, _, j = s.post("/api/ai/queue", dict(QUICK, prompt="during the restart %d" % k, seed=50 + k))
                answers.append(st)
                if st in (200, 201):
                    during.append(j["id"])
                    k += 1
            except OSError as e:
                answers.append(repr(e))
            time.sleep(0.3)

    th = threading.Thread(target=enqueue_during, daemon=True)
    th.start()
    time.sleep(0.5)
    f.pg.restart(down_s=2.0)
    t.ok(True, "PostgreSQL restarted (fast shutdown, 2 s down)")
    time.sleep(2.0)
    stop.set()
    th.join(30)
    t.ok(all(s.alive() for s in f.servers), "both servers lived through it")
    t.ok(503 in answers, "a request while the database was away got 503", sorted(set(map(str, answers))))
    t.ok(not [x for x in answers if isinstance(x, str)], "no connection was dropped by a server", answers)
    ls = EventListener(b)
    ls.start()
    ls.ready.wait(30)
    after = []
    for i in range(4):
        st, _, j = f.retry(lambda i=i: a.post("/v1/videos", dict(QUICK, prompt="after the restart %d" % i, seed=80 + i)))
        if st in (200, 201):
            after.append(j["id"])
    t.ok(len(after) == 4, "jobs are taken after the restart", len(after))
    every = ids + during + after
    done = f.wait_all(a, every, timeout=400)
    t.ok(len(done) == len(every) and all(j["status"] == "completed" for j in done.values()),
         "all %d jobs (before, during, after) completed" % len(every),
         {i: j["status"] for i, j in done.items() if j["status"] != "completed"} or (len(done), len(every)))
    rows = f.store_rows()
    t.ok(len(rows) == len(every) and all(r[1] == "completed" for r in rows), "the store holds exactly those jobs",
         len(rows))
    comp = f.sql("SELECT j.id, count(*) FROM job_history h JOIN jobs j ON j.seq = h.job_seq WHERE "
                 "h.status = 'completed' GROUP BY j.id")
    counts = dict(line.split("\t") for line in comp.splitlines() if line)
    t.ok(all(counts.get(i) == "1" for i in every), "each completed once", [i for i in every if counts.get(i) != "1"])
    vids = sorted(x for x in os.listdir(os.path.join(f.outputs, "videos")) if x.endswith(".mp4"))
    named = sorted(r[0] for r in rows)
    t.ok(len(vids) == len(every) and all(any(v.startswith(i) for v in vids) for i in named), "one video per job",
         (len(vids), len(every)))
    deadline = time.time() + 20
    seen = lambda: {e[2].get("id") for e in ls.snapshot() if e[2].get("status") == "completed"}  # noqa: E731
    while time.time() < deadline and not set(after) <= seen():
        time.sleep(0.2)
    t.ok(set(after) <= seen(), "server b's stream has the completions of the jobs enqueued on a after the restart")
    logs = a.logtext() + b.logtext()
    t.ok("the database answers again" in logs, "the servers logged the reconnection")
    ls.stop()
    codes = [s.stop() for s in f.servers]
    t.ok(codes == [0, 0], "both stop cleanly", codes)
finally:
    f.cleanup()
t.finish(12)
