"""h3 serve: bad requests get the right 4xx with a JSON error naming the field, and none of them hurts
the server (it answers /health after each, completes a job at the end and exits 0 on SIGTERM; under
the ASan build a leak or an overflow makes that exit fail).  Run with an API key, small limits."""
import os
import socket
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from h3srv import Checks, Server, multipart, need_binary  # noqa: E402

need_binary()
t = Checks("badreq")
KEY = "sekrit-key-123"
srv = Server(key=KEY, args=["--max-upload-mb", "1", "--max-body-kb", "4", "--max-queue", "3"])


def expect(what, code, resp, param=None):
    st, hd, body = resp
    good = (st == code and isinstance(body, dict) and isinstance(body.get("error"), dict)
            and isinstance(body["error"].get("message"), str) and hd.get("content-type") == "application/json")
    if good and param is not None:
        good = body["error"].get("param") == param
    t.ok(good, "%s -> %d%s" % (what, code, (" (" + body["error"]["message"] + ")") if good else ""), (st, body))
    hs = srv.get("/health", key=False)
    if hs[0] != 200:
        t.ok(False, "the server answers after: " + what, hs)


def raw(data, timeout=10):
    """Bytes sent as they are; the status line back (or '' when the server closed)."""
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=timeout)
    try:
        try:
            s.sendall(data)
            s.shutdown(socket.SHUT_WR)
        except OSError:  # the server answered and closed before the whole request was sent (an oversized one)
            pass
        out = b""
        while True:
            try:
                chunk = s.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                break
            out += chunk
        return out.split(b"\r\n", 1)[0].decode(errors="replace")
    finally:
        s.close()


try:
    # the key
    expect("no key", 401, srv.get("/v1/videos", key=False))
    expect("a wrong key", 401, srv.get("/v1/videos", headers={"Authorization": "Bearer nope"}))
    expect("a key of another scheme", 401, srv.get("/v1/videos", headers={"Authorization": "Basic " + KEY}))
    expect("a longer key", 401, srv.get("/v1/videos", headers={"Authorization": "Bearer " + KEY + "x"}))
    expect("no key on /api/events", 401, srv.get("/api/events", key=False))
    st, _, b = srv.get("/health", key=False)
    t.ok(st == 200 and b == {"status": "ok"}, "/health needs no key")
    st, _, b = srv.get("/v1/videos")
    t.ok(st == 200, "the right key: 200", st)

    # JSON, field by field
    P = "/v1/videos"
    expect("malformed JSON", 400, srv.post(P, "{\"prompt\": \"x\""))
    expect("not an object", 400, srv.post(P, "[1, 2]"))
    expect("an empty body", 400, srv.post(P, ""))
    expect("a duplicate key", 400, srv.post(P, "{\"prompt\": \"a\", \"prompt\": \"b\"}"))
    expect("no prompt", 400, srv.post(P, {"seed": 1}), "prompt")
    expect("an empty prompt", 400, srv.post(P, {"prompt": ""}), "prompt")
    expect("prompt of the wrong type", 400, srv.post(P, {"prompt": 42}), "prompt")
    expect("seed of the wrong type", 400, srv.post(P, {"prompt": "x", "seed": [1]}), "seed")
    expect("seed negative", 400, srv.post(P, {"prompt": "x", "seed": -5}), "seed")
    expect("steps out of range", 400, srv.post(P, {"prompt": "x", "num_inference_steps": 1}), "num_inference_steps")
    expect("steps too many", 400, srv.post(P, {"prompt": "x", "num_inference_steps": 10 ** 9}), "num_inference_steps")
    expect("steps as a float", 400, srv.post(P, {"prompt": "x", "num_inference_steps": 2.5}), "num_inference_steps")
    expect("size malformed", 400, srv.post(P, {"prompt": "x", "size": "wide"}), "size")
    expect("size not a multiple of 32", 400, srv.post(P, {"prompt": "x", "size": "100x100"}), "size")
    expect("seconds negative", 400, srv.post(P, {"prompt": "x", "seconds": "-4"}), "seconds")
    expect("seconds and num_frames", 400, srv.post(P, {"prompt": "x", "seconds": 1, "num_frames": 22}))
    expect("no_audio not a boolean", 400, srv.post(P, {"prompt": "x", "no_audio": "maybe"}), "no_audio")
    expect("partition unknown", 400, srv.post(P, {"prompt": "x", "partition": "t9"}), "partition")
    expect("an unknown field", 400, srv.post(P, {"prompt": "x", "colour": "red"}), "colour")
    expect("a local path (output)", 400, srv.post(P, {"prompt": "x", "output": "/etc/passwd"}), "output")
    expect("a local path (text_states)", 400, srv.post(P, {"prompt": "x", "text_states": "/etc/passwd"}), "text_states")
    expect("a local path (ref_image)", 400, srv.post(P, {"prompt": "x", "ref_image": ["/etc/passwd"]}), "ref_image")
    expect("an engine option (model path)", 400, srv.post(P, {"prompt": "x", "device": "cuda"}), "device")
    expect("an unknown upload id", 400, srv.post(P, {"prompt": "x", "input_reference": "file_nope"}), "input_reference")
    expect("references not a list", 400, srv.post(P, {"prompt": "x", "references": "file_x"}), "references")
    expect("a number for a LoRA name", 400, srv.post(P, {"prompt": "x", "lora": 3}), "lora")
    expect("an invalid UTF-8 prompt", 400, srv.post(P, b"{\"prompt\": \"\xff\xfe\"}"))
    expect("a NUL in the prompt", 400, srv.post(P, {"prompt": "a\u0000b"}))
    expect("a body over --max-body-kb", 413, srv.post(P, {"prompt": "x" * 8000}))
    expect("a JSON body to the upload route", 415, srv.post("/api/images", {"a": 1}))
    expect("multipart to a JSON route", 415,
           srv.post("/api/ai/queue", b"--x--\r\n", headers={"Content-Type": "multipart/form-data; boundary=x"}))
    expect("PATCH an unknown field", 400, srv.request("PATCH", "/api/ai/queue/video_x", {"stars": 5}), "stars")
    expect("PATCH a missing job", 404, srv.request("PATCH", "/api/ai/queue/video_x", {"rating": "approved"}))

    # query arguments
    expect("limit 0", 400, srv.get("/v1/videos?limit=0"), "limit")
    expect("limit not a number", 400, srv.get("/v1/videos?limit=ten"), "limit")
    expect("order sideways", 400, srv.get("/v1/videos?order=sideways"), "order")
    expect("after an unknown id", 400, srv.get("/v1/videos?after=video_nope"), "after")
    expect("status unknown", 400, srv.get("/api/ai/queue?status=done"), "status")
    expect("offset negative", 400, srv.get("/api/ai/queue?offset=-1"), "offset")
    expect("variant unknown", 400, srv.get("/v1/videos/video_x/content?variant=gif"), "variant")
    expect("Last-Event-ID not a number", 400, srv.get("/api/events", headers={"Last-Event-ID": "abc"}))

    # routes, methods, paths
    expect("an unknown route", 404, srv.get("/v2/videos"))
    expect("an unknown job", 404, srv.get("/v1/videos/video_0000"))
    expect("DELETE an unknown job", 404, srv.request("DELETE", "/api/ai/queue/video_0000"))
    expect("PUT on /v1/videos", 405, srv.request("PUT", "/v1/videos", {"prompt": "x"}))
    expect("POST on /api/status", 405, srv.post("/api/status", {}))
    expect(".. in the path", 400, srv.get("/api/files/../h3.db"))
    expect("encoded .. in the path", 400, srv.get("/api/files/videos/%2e%2e/%2e%2e/h3.db"))
    expect("a folder that is not served", 404, srv.get("/api/files/h3.db"))
    expect("the database by name", 404, srv.get("/api/files/videos/h3.db"))
    expect("a hidden file", 404, srv.get("/api/files/uploads/.part-x"))
    expect("a backslash path", 400, srv.get("/api/files/videos\\..\\h3.db"))

    # uploads: over the limit, not media, empty, malformed
    big = b"\x89PNG\r\n\x1a\n" + os.urandom(1200 * 1024)
    body, ctype = multipart({}, [("file", "big.png", big, "image/png")])
    expect("an upload over --max-upload-mb", 413, srv.post("/api/images", body, headers={"Content-Type": ctype}))
    body, ctype = multipart({}, [("file", "fake.png", b"<?php echo 1; ?>" * 100, "image/png")])
    expect("a non-media upload named .png", 415, srv.post("/api/images", body, headers={"Content-Type": ctype}), "file")
    m3u = b"#EXTM3U\n#EXTINF:1,\nfile:///etc/passwd\n"
    body, ctype = multipart({}, [("file", "list.m3u8", m3u, "video/mp4")])
    expect("a playlist naming a local file", 415, srv.post("/api/images", body, headers={"Content-Type": ctype}), "file")
    body, ctype = multipart({}, [("file", "empty.png", b"", "image/png")])
    expect("an empty file", 400, srv.post("/api/images", body, headers={"Content-Type": ctype}), "file")
    body, ctype = multipart({"note": "no files"}, [])
    expect("no files", 400, srv.post("/api/images", body, headers={"Content-Type": ctype}))
    expect("multipart without a boundary", 400,
           srv.post("/api/images", b"garbage", headers={"Content-Type": "multipart/form-data"}))
    body, ctype = multipart({"prompt": "x", "seconds": "abc"}, [])
    expect("a form field out of range", 400, srv.post(P, body, headers={"Content-Type": ctype}), "seconds")
    body, ctype = multipart({"prompt": "x", "bogus": "1"}, [])
    expect("an unknown form field", 400, srv.post(P, body, headers={"Content-Type": ctype}), "bogus")
    body, ctype = multipart({"prompt": "x"}, [("input_reference", "a.txt", b"hello", "image/png")])
    expect("a non-media input_reference", 415, srv.post(P, body, headers={"Content-Type": ctype}), "input_reference")
    left = [f for f in os.listdir(os.path.join(srv.outputs, "uploads"))]
    t.ok(not left, "refused uploads leave no file", left)

    # raw HTTP garbage
    line = raw(b"GARBAGE\r\n\r\n")
    t.ok(line == "" or line.startswith("HTTP/1.1 4"), "a garbage request line: 4xx or closed", line)
    line = raw(b"GET /health HTTP/1.1\r\nHost: x\r\n" + b"X-Long: " + b"a" * 200000 + b"\r\n\r\n")
    t.ok(line == "" or line.startswith("HTTP/1.1 4"), "a 200 KB header: 4xx or closed", line)
    line = raw(b"POST /v1/videos HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + KEY.encode() +
               b"\r\nContent-Type: application/json\r\nContent-Length: 999999999\r\n\r\n{}")
    t.ok(line.startswith("HTTP/1.1 413"), "a huge Content-Length: 413 before reading it", line)
    line = raw(b"POST /v1/videos HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + KEY.encode() +
               b"\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n" +
               b"".join(b"1000\r\n" + b" " * 4096 + b"\r\n" for _ in range(4)) + b"0\r\n\r\n")
    t.ok(line.startswith("HTTP/1.1 413"), "a chunked body over the limit: 413", line)
    st, _, _ = srv.get("/health", key=False)
    t.ok(st == 200, "still healthy after the raw requests")

    # the queue limit: 3 jobs queued or running at most
    codes = [srv.post(P, {"prompt": "fill %d" % i, "num_inference_steps": 2})[0] for i in range(4)]
    t.ok(codes[:3] == [200, 200, 200] and codes[3] == 429, "--max-queue 3: the fourth gets 429", codes)
    st, _, l = srv.get("/v1/videos?limit=10")
    ok_all = all(srv.wait_job(x["id"], timeout=120)["status"] == "completed" for x in l["data"])
    t.ok(ok_all, "and the server still runs its jobs")
    rc = srv.stop()
    t.ok(rc == 0, "SIGTERM: exit 0 (no sanitizer report)", (rc, srv.logtext()[-3000:]))
    log = srv.logtext()
    t.ok("ERROR: AddressSanitizer" not in log and "runtime error" not in log, "no sanitizer report in the log")
finally:
    srv.cleanup()
t.finish(75)
