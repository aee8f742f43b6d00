#!/usr/bin/env python3
"""Drive a program through a pseudo-terminal, as a user at a terminal would: wait for text, type,
send Ctrl-C / Ctrl-D.  Used by tests/cli/session.sh (the interactive session) and
tests/cli/show.sh (terminal graphics).  Standard library only.

    p = Pty([prog, args...], env=..., cwd=...)
    p.expect("h3> ")            # waits (with a timeout) for the text, returns what came before it
    p.send("a red fox\\n"); p.ctrl_c(); p.ctrl_d(); rc = p.wait()
    p.log                        # everything the program wrote (bytes)
"""
import os
import pty
import select
import signal
import sys
import time


class Pty:
    def __init__(self, argv, env=None, cwd=None, cols=200, rows=50):
        self.log = b""
        self.pos = 0
        pid, fd = pty.fork()
        if pid == 0:
            try:
                if cwd:
                    os.chdir(cwd)
                os.execve(argv[0], argv, env if env is not None else os.environ)
            except Exception as e:  # noqa: BLE001
                sys.stderr.write("exec failed: %s\n" % e)
            os._exit(127)
        self.pid, self.fd = pid, fd
        try:
            import fcntl
            import struct
            import termios
            fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        except Exception:  # noqa: BLE001
            pass
        self.rc = None

    def _read(self, timeout):
        r, _, _ = select.select([self.fd], [], [], timeout)
        if not r:
            return False
        try:
            data = os.read(self.fd, 65536)
        except OSError:  # the child closed the terminal
            data = b""
        if not data:
            raise EOFError
        self.log += data
        return True

    def expect(self, text, timeout=60.0):
        """Wait until `text` (str or bytes) appears after the last match; return what came before it."""
        pat = text.encode() if isinstance(text, str) else text
        end = time.time() + timeout
        while True:
            i = self.log.find(pat, self.pos)
            if i >= 0:
                before = self.log[self.pos:i]
                self.pos = i + len(pat)
                return before.decode(errors="replace")
            left = end - time.time()
            if left <= 0:
                raise TimeoutError("timed out waiting for %r; last output:\n%s" %
                                   (text, self.log[-2000:].decode(errors="replace")))
            try:
                self._read(min(left, 0.2))
            except EOFError:
                raise EOFError("the program ended before %r appeared; output:\n%s" %
                               (text, self.log[-2000:].decode(errors="replace")))

    def send(self, s, pause=0.15):
        # a person's pause after the prompt appears: libedit switches the terminal's mode after printing
        # its prompt, and a Ctrl-D typed ahead of that switch is lost in the tty driver (seen here)
        time.sleep(pause)
        os.write(self.fd, s.encode() if isinstance(s, str) else s)

    def ctrl_c(self):
        self.send(b"\x03")

    def ctrl_d(self):
        self.send(b"\x04")

    def wait(self, timeout=60.0):
        end = time.time() + timeout
        while time.time() < end:
            try:
                self._read(0.1)
            except EOFError:
                pass
            pid, st = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                try:
                    while self._read(0.05):
                        pass
                except EOFError:
                    pass
                self.rc = os.waitstatus_to_exitcode(st)
                return self.rc
        os.kill(self.pid, signal.SIGKILL)
        raise TimeoutError("the program did not exit; output:\n%r" % self.log[-1500:])
