"""Helpers of the fleet tests: several `h3 serve` processes on one PostgreSQL store (docs/FLEET.md)
sharing one outputs folder, as several hosts share a network file system."""
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from h3srv import Server  # noqa: E402
from pgtest import Postgres  # noqa: E402

QUICK = {"size": "128x128", "num_frames": 9, "num_inference_steps": 2}


class Fleet:
    def __init__(self, n, lease=4, heartbeat=1, extra=()):
        self.pg = Postgres()
        self.url = self.pg.new_db()
        self.dir = tempfile.mkdtemp(prefix="h3fleet.")
        self.outputs = os.path.join(self.dir, "shared-outputs")
        self.args = ["--db", self.url, "--lease", str(lease), "--heartbeat", str(heartbeat)] + list(extra)
        self.servers = []
        try:
            for _ in range(n):
                self.servers.append(Server(args=self.args, outputs=self.outputs))
        except Exception:
            self.cleanup()  # no cluster left running behind a server that did not start
            raise

    def retry(self, fn, timeout=60):
        """fn() -> (status, headers, body), retried on 503 and connection errors (a database restart)."""
        t0 = time.time()
        while True:
            try:
                r = fn()
                if r[0] != 503 or time.time() - t0 > timeout:
                    return r
            except OSError:
                if time.time() - t0 > timeout:
                    raise
            time.sleep(0.2)

    def wait_all(self, srv, ids, timeout=300):
        """Waits until every id is finished (seen through srv); {id: job}."""
        t0 = time.time()
        done = {}
        while time.time() - t0 < timeout and len(done) < len(ids):
            for i in ids:
                if i in done:
                    continue
                try:
                    st, _, j = srv.get("/api/ai/queue/" + i)
                except OSError:
                    continue
                if st == 200 and j["status"] in ("completed", "failed", "cancelled"):
                    done[i] = j
            time.sleep(0.2)
        return done

    def store_rows(self, cols="id, status, attempts, expiries, coalesce(worker, '')"):
        out = self.pg.sql("SELECT %s FROM jobs ORDER BY seq" % cols, db=self.url.rsplit("/", 1)[1])
        return [line.split("\t") for line in out.splitlines() if line]

    def sql(self, text):
        return self.pg.sql(text, db=self.url.rsplit("/", 1)[1])

    def started_by(self):
        """{job id: [server index, ...]} from the servers' logs ("job X: started")."""
        out = {}
        for k, s in enumerate(self.servers):
            for line in s.logtext().splitlines():
                if ": started" in line and "job video_" in line:
                    jid = line.split("job ", 1)[1].split(":", 1)[0]
                    out.setdefault(jid, []).append(k)
        return out

    def server_of_worker(self, worker):
        """The index of the server whose lease name (host:pid:random) this is, or -1."""
        parts = worker.split(":")
        for k, s in enumerate(self.servers):
            if len(parts) >= 2 and parts[-2] == str(s.proc.pid):
                return k
        return -1

    def cleanup(self):
        for s in self.servers:
            s.cleanup()
        self.pg.cleanup()
        import shutil
        shutil.rmtree(self.dir, ignore_errors=True)
