"""Helpers of the h3 serve tests (Python standard library only).

Server(...) starts the real binary ($H3) on the built-in toy model on a free
loopback port (--port 0; the port is read from its first line), in a
temporary folder of its own; call stop() (SIGTERM) or kill9().  Checks count
into a Checks object, which prints 'N passed, N failed' and sets the exit
status.
"""
import http.client
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

H3 = os.environ.get("H3")
SANITIZED = os.environ.get("H3_SANITIZE", "OFF").upper() in ("ON", "1", "TRUE")


class Checks:
    def __init__(self, name):
        self.name, self.passed, self.failed = name, 0, 0

    def ok(self, cond, what, detail=""):
        if cond:
            self.passed += 1
            print("ok   " + what, flush=True)
        else:
            self.failed += 1
            print("FAIL " + what + (": " + str(detail) if detail != "" else ""), flush=True)
        return cond

    def finish(self, min_checks):
        if self.passed + self.failed < min_checks:
            self.failed += 1
            print("FAIL only %d checks ran (at least %d expected)" % (self.passed + self.failed - 1, min_checks))
        print("%d passed, %d failed" % (self.passed, self.failed), flush=True)
        sys.exit(1 if self.failed else 0)


def need_binary():
    if not H3 or not os.access(H3, os.X_OK):
        print("H3 is not set to the h3 binary")
        sys.exit(2)
    r = subprocess.run([H3, "serve", "--help"], capture_output=True, text=True)
    if r.returncode != 0:
        print("this h3 has no serve command: " + r.stderr.strip())
        sys.exit(77)


# H3_TEST_STORE=postgresql: every Server without a --db of its own gets a fresh database on one throwaway
# PostgreSQL cluster of this test process (tests/server/pgtest.py), so the suite runs on both stores.
STORE = os.environ.get("H3_TEST_STORE", "sqlite")
_PG = None


def pg_cluster():
    global _PG
    if _PG is None:
        import atexit
        from pgtest import Postgres
        _PG = Postgres()
        atexit.register(_PG.cleanup)
    return _PG


class Server:
    def __init__(self, workdir=None, args=(), key=None, env=None, outputs=None):
        self.own_dir = workdir is None
        self.dir = workdir or tempfile.mkdtemp(prefix="h3serve.")
        self.outputs = outputs or os.path.join(self.dir, "out")
        self.key = key
        self.args = list(args)
        if STORE == "postgresql" and not any(a == "--db" or a.startswith("--db=") for a in self.args):
            self.args += ["--db", pg_cluster().new_db()]
        self.env = dict(os.environ)
        self.env.setdefault("H3_TOY_DIR", os.path.join(self.dir, "toy"))
        self.env.update(env or {})
        self.proc = None
        self.port = None
        self.start()

    def start(self):
        cmd = [H3, "serve", "--port", "0", "--outputs", self.outputs] + self.args
        if self.key:
            cmd += ["--api-key", self.key]
        self.log = open(os.path.join(self.dir, "server-%d.log" % int(time.time() * 1000)), "w+")
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self.log, text=True, env=self.env,
                                     cwd=self.dir)
        line = self.proc.stdout.readline()  # "h3 serve: listening on http://127.0.0.1:PORT (...)"
        if "listening on http://" not in line:
            self.proc.wait(30)
            self.log.seek(0)
            raise RuntimeError("the server did not start: %r %s" % (line, self.log.read()))
        self.port = int(line.split("listening on http://127.0.0.1:")[1].split()[0])
        threading.Thread(target=self.proc.stdout.read, daemon=True).start()

    def logtext(self):
        self.log.flush()
        with open(self.log.name) as f:
            return f.read()

    def alive(self):
        return self.proc.poll() is None

    def stop(self, timeout=60):
        """SIGTERM; the exit status (None when it had to be killed)."""
        if self.proc.poll() is not None:
            return self.proc.returncode
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return None

    def kill9(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def cleanup(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if self.own_dir:
            shutil.rmtree(self.dir, ignore_errors=True)

    def rss(self):
        try:
            with open("/proc/%d/status" % self.proc.pid) as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1]) * 1024
        except OSError:
            return 0
        return 0

    # ---- HTTP ----
    def conn(self, timeout=60):
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)

    def request(self, method, path, body=None, headers=None, key=True, raw=False, timeout=60):
        """(status, headers dict (lowercase names), body: parsed JSON, or bytes when raw / not JSON)."""
        h = dict(headers or {})
        if key and self.key and "Authorization" not in h:
            h["Authorization"] = "Bearer " + self.key
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
            h.setdefault("Content-Type", "application/json")
        elif isinstance(body, str):
            body = body.encode()
        c = self.conn(timeout)
        try:
            try:
                c.request(method, path, body=body, headers=h)
            except (BrokenPipeError, ConnectionResetError):
                pass  # a server may answer (413) and close before the body is sent: its answer is still read
            r = c.getresponse()
            data = r.read()
            hd = {k.lower(): v for k, v in r.getheaders()}
        finally:
            c.close()
        if not raw and hd.get("content-type", "").startswith("application/json"):
            try:
                return r.status, hd, json.loads(data)
            except ValueError:
                return r.status, hd, data
        return r.status, hd, data

    def get(self, path, **kw):
        return self.request("GET", path, **kw)

    def post(self, path, body, **kw):
        return self.request("POST", path, body, **kw)

    def wait_job(self, job_id, statuses=("completed", "failed", "cancelled"), timeout=300, prefix="/v1/videos/"):
        t0 = time.time()
        while time.time() - t0 < timeout:
            st, _, j = self.get(prefix + job_id)
            if st == 200 and j["status"] in statuses:
                return j
            time.sleep(0.05)
        return None


def multipart(fields, files):
    """fields: {name: text}; files: [(field, filename, bytes, content_type)] -> (body, content type)."""
    b = "----h3test" + uuid.uuid4().hex
    out = []
    for k, v in fields.items():
        out.append(("--%s\r\nContent-Disposition: form-data; name=\"%s\"\r\n\r\n%s\r\n" % (b, k, v)).encode())
    for field, name, data, ctype in files:
        out.append(("--%s\r\nContent-Disposition: form-data; name=\"%s\"; filename=\"%s\"\r\nContent-Type: %s\r\n\r\n"
                    % (b, field, name, ctype)).encode() + data + b"\r\n")
    out.append(("--%s--\r\n" % b).encode())
    return b"".join(out), "multipart/form-data; boundary=" + b


class EventListener(threading.Thread):
    """Reads /api/events into self.events [(id, type, data)], reconnecting with Last-Event-ID when
    reconnect_every > 0 (seconds) or when the stream ends, until stop()."""

    def __init__(self, srv, last_id=None, reconnect_every=0.0):
        super().__init__(daemon=True)
        self.srv, self.last, self.every = srv, last_id, reconnect_every
        self.events, self.connects, self.errors = [], 0, []
        self.halt = threading.Event()
        self.ready = threading.Event()
        self.lock = threading.Lock()

    def stop(self):
        self.halt.set()

    def run(self):
        while not self.halt.is_set():
            try:
                self.one_connection()
            except Exception as e:  # noqa: BLE001 - reported by the test
                if not self.halt.is_set():
                    self.errors.append(repr(e))
                    time.sleep(0.2)

    def one_connection(self):
        c = http.client.HTTPConnection("127.0.0.1", self.srv.port, timeout=30)
        h = {}
        if self.srv.key:
            h["Authorization"] = "Bearer " + self.srv.key
        if self.last is not None:
            h["Last-Event-ID"] = str(self.last)
        c.request("GET", "/api/events", headers=h)
        r = c.getresponse()
        if r.status != 200:
            raise RuntimeError("events: HTTP %d" % r.status)
        self.connects += 1
        t0 = time.time()
        ev = {}
        try:
            while not self.halt.is_set():
                if self.every > 0 and time.time() - t0 > self.every:
                    return  # drop the connection; the next one resumes from self.last
                line = r.fp.readline()
                if not line:
                    return
                line = line.decode().rstrip("\n")
                if line.startswith(":"):
                    self.ready.set()
                    continue
                if line == "":
                    if "data" in ev:
                        with self.lock:
                            self.events.append((int(ev.get("id", -1)), ev.get("event", ""), json.loads(ev["data"])))
                        self.last = int(ev.get("id", -1))
                    ev = {}
                    continue
                k, _, v = line.partition(": ")
                ev[k] = v
        finally:
            c.close()

    def snapshot(self):
        with self.lock:
            return list(self.events)


def ffprobe_streams(path):
    r = subprocess.run(["ffprobe", "-v", "error", "-show_entries", "stream=codec_type,codec_name", "-of", "json", path],
                       capture_output=True, text=True)
    if r.returncode != 0:
        return []
    return [(s.get("codec_type"), s.get("codec_name")) for s in json.loads(r.stdout).get("streams", [])]


class _Endpoint:
    def __init__(self, port, key):
        self.port, self.key = port, key


def listeners_process(port, key, n, ready, stop, target, out):
    """In a process of its own (multiprocessing, spawn): n event listeners, a fifth of them dropping their
    connection every few seconds and resuming with Last-Event-ID.  After `stop`, waits until each saw the
    event id in `target`, then puts {gaps, behind, reconnects, events, errors} on `out`."""
    ep = _Endpoint(port, key)
    ls = [EventListener(ep, reconnect_every=(3.0 + (k % 5) * 0.7) if k % 5 == 0 else 0.0) for k in range(n)]
    for x in ls:
        x.start()
    for x in ls:
        x.ready.wait(30)
    ready.set()
    stop.wait()
    last = target.value
    deadline = time.time() + 30
    while time.time() < deadline and any((x.snapshot() or [(0,)])[-1][0] < last for x in ls):
        time.sleep(0.2)
    res = {"gaps": 0, "behind": 0, "reconnects": 0, "events": 0, "errors": [], "connected": 0}
    for x in ls:
        ev = [e[0] for e in x.snapshot()]
        if ev and ev != list(range(ev[0], ev[0] + len(ev))):
            res["gaps"] += 1
        if not ev or ev[-1] != last:
            res["behind"] += 1
        res["reconnects"] += max(x.connects - 1, 0)
        res["events"] += len(ev)
        res["connected"] += 1 if x.ready.is_set() else 0
        res["errors"] += x.errors[:2]
        x.stop()
    out.put(res)
