"""A throwaway PostgreSQL for the h3 serve tests (Python standard library only).

Postgres() runs Debian's PostgreSQL binaries (initdb, pg_ctl) on a cluster in
a temporary folder of its own, listening on a free loopback port with trust
authentication, fsync off.  PostgreSQL refuses to run as root: as root the
cluster belongs to, and the server runs as, user `nobody` (runuser).  When
the binaries are absent the test is skipped (exit 77), unless H3_REQUIRE_PG is
set (then it fails).  new_db() creates a fresh database and returns its URL.
"""
import glob
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time


def find_bindir():
    env = os.environ.get("H3_PG_BINDIR")
    if env and os.access(os.path.join(env, "initdb"), os.X_OK):
        return env
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]) if p.split("/")[4].isdigit() else 0)
    if found:
        return os.path.dirname(found[-1])
    p = shutil.which("initdb")
    return os.path.dirname(p) if p else None


def require_binaries():
    b = find_bindir()
    if not b or not os.access(os.path.join(b, "pg_ctl"), os.X_OK):
        if os.environ.get("H3_REQUIRE_PG"):
            print("FAIL PostgreSQL binaries (initdb, pg_ctl) not found and H3_REQUIRE_PG is set")
            sys.exit(1)
        print("skipped: PostgreSQL binaries (initdb, pg_ctl) not found (tools/deps.sh installs them)")
        sys.exit(77)
    return b


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


class Postgres:
    def __init__(self):
        self.bindir = require_binaries()
        self.dir = tempfile.mkdtemp(prefix="h3pg.")
        os.chmod(self.dir, 0o755)
        self.data = os.path.join(self.dir, "data")
        self.sock = os.path.join(self.dir, "sock")
        self.logfile = os.path.join(self.dir, "postgres.log")
        self.port = free_port()
        self.user = "h3"
        self.runas = []
        if os.geteuid() == 0:  # PostgreSQL refuses root: the cluster is nobody's
            self.runas = ["runuser", "-u", "nobody", "--"]
        os.mkdir(self.data, 0o700)
        os.mkdir(self.sock, 0o755)
        open(self.logfile, "w").close()
        if self.runas:
            for p in (self.data, self.sock, self.logfile):
                shutil.chown(p, "nobody")
        self._run(["initdb", "-D", self.data, "-U", self.user, "--auth=trust", "-E", "UTF8", "--no-sync",
                   "--no-instructions"] if self._initdb_has("--no-instructions") else
                  ["initdb", "-D", self.data, "-U", self.user, "--auth=trust", "-E", "UTF8", "--no-sync"])
        self.start()
        self.n = 0

    def _initdb_has(self, flag):
        r = subprocess.run([os.path.join(self.bindir, "initdb"), "--help"], capture_output=True, text=True)
        return flag in r.stdout

    def _run(self, argv, check=True):
        cmd = self.runas + [os.path.join(self.bindir, argv[0])] + argv[1:]
        r = subprocess.run(cmd, capture_output=True, text=True, cwd=self.dir)
        if check and r.returncode != 0:
            raise RuntimeError("%s: %s %s" % (" ".join(argv[:2]), r.stdout, r.stderr))
        return r

    def start(self):
        opts = "-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200" % (self.port, self.sock)
        self._run(["pg_ctl", "-D", self.data, "-l", self.logfile, "-o", opts, "-w", "-t", "60", "start"])

    def stop(self, mode="fast"):
        self._run(["pg_ctl", "-D", self.data, "-m", mode, "-w", "-t", "60", "stop"], check=False)

    def restart(self, down_s=0.0):
        self.stop()
        time.sleep(down_s)
        self.start()

    def url(self, db="postgres"):
        return "postgresql://%s@127.0.0.1:%d/%s" % (self.user, self.port, db)

    def sql(self, text, db="postgres"):
        """Runs text with psql; its output (tab-separated rows)."""
        r = subprocess.run([os.path.join(self.bindir, "psql"), "-X", "-q", "-A", "-t", "-F", "\t", "-v",
                            "ON_ERROR_STOP=1", "-d", self.url(db), "-c", text], capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError("psql: %s" % r.stderr)
        return r.stdout

    def new_db(self):
        self.n += 1
        name = "h3test%d" % self.n
        self.sql("CREATE DATABASE %s" % name)
        return self.url(name)

    def cleanup(self):
        self.stop("immediate")
        shutil.rmtree(self.dir, ignore_errors=True)
