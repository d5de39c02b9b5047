#!/usr/bin/env python3
"""Install benchmark (issue 3, "Benchmarks": goal <= 1.2x the baseline's time).

Installs one asset -- a tar.gz of random data, 200 MiB by default -- from nginx on loopback through
the real earshotd (time from sending `earshot.install` to receiving `earshot.install.result`:
download with libcurl, SHA-256 verification, extraction with libarchive, fsync, rename, SQLite
commit), against `curl -o FILE URL && tar -xzf FILE` of the same file from the same server. Each
contender runs N times (default 3; every earshotd run starts a fresh daemon on empty state and cache
dirs); the best time counts. nginx serves from a warm page cache; everything is written to the same
filesystem (the work dir). A reference row adds what earshotd does beyond curl + tar (sha256sum and
sync) to the baseline; it is printed for information only.

Run it through Benchmarks/install.sh (builds earshotd in release mode first). Needs nginx, minisign,
curl, tar and gzip (Debian packages nginx, minisign, curl, tar, gzip). Standard library only.

    Benchmarks/install.sh [--size MiB] [--runs N] [--dir DIR] [--keep]

The random data and its tar.gz are created once and reused from DIR (default $EARSHOT_BENCH_DIR,
else $XDG_CACHE_HOME/earshot-bench, else ~/.cache/earshot-bench).
"""
import argparse
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

MiB = 1 << 20


def default_dir():
    env = os.environ
    if env.get("EARSHOT_BENCH_DIR"):
        return env["EARSHOT_BENCH_DIR"]
    if env.get("XDG_CACHE_HOME"):
        return os.path.join(env["XDG_CACHE_HOME"], "earshot-bench")
    return os.path.expanduser("~/.cache/earshot-bench")


def fail(message):
    sys.exit("install-bench: " + message)


def ensure_asset(directory, size_mib):
    """model.bin of random bytes and asset.tar.gz (made with tar -czf) in DIR/install-<size>M."""
    base = os.path.join(directory, "install-%dM" % size_mib)
    os.makedirs(base, exist_ok=True)
    model = os.path.join(base, "src", "model.bin")
    archive = os.path.join(base, "asset.tar.gz")
    digest_file = archive + ".sha256"
    if not (os.path.exists(model) and os.path.getsize(model) == size_mib * MiB):
        print("creating %d MiB of random data in %s ..." % (size_mib, model), flush=True)
        os.makedirs(os.path.dirname(model), exist_ok=True)
        with open(model + ".partial", "wb") as out:
            for _ in range(size_mib):
                out.write(os.urandom(MiB))
        os.rename(model + ".partial", model)
        for stale in (archive, digest_file):
            if os.path.exists(stale):
                os.unlink(stale)
    if not (os.path.exists(archive) and os.path.exists(digest_file)):
        print("packing %s ..." % archive, flush=True)
        subprocess.run(["tar", "-czf", archive + ".partial", "-C", os.path.dirname(model), "model.bin"], check=True)
        os.rename(archive + ".partial", archive)
        digest = hashlib.sha256()
        with open(archive, "rb") as f:
            for block in iter(lambda: f.read(4 * MiB), b""):
                digest.update(block)
        with open(digest_file, "w") as f:
            f.write(digest.hexdigest())
    with open(digest_file) as f:
        return archive, f.read().strip(), os.path.getsize(model)


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.02)
    fail("timed out waiting for " + what)


def connects(family, address):
    try:
        with socket.socket(family, socket.SOCK_STREAM) as s:
            s.connect(address)
        return True
    except OSError:
        return False


def start_nginx(work, root):
    port = free_port()
    conf = os.path.join(work, "nginx.conf")
    for sub in ("tmp",):
        os.makedirs(os.path.join(work, sub), exist_ok=True)
    user = "user root;" if os.geteuid() == 0 else ""
    with open(conf, "w") as f:
        f.write("""daemon off;
master_process on;
worker_processes 1;
%(user)s
pid %(work)s/nginx.pid;
error_log %(work)s/nginx-error.log;
events { worker_connections 64; }
http {
    access_log %(work)s/nginx-access.log;
    default_type application/octet-stream;
    sendfile on;
    client_body_temp_path %(work)s/tmp/body;
    proxy_temp_path %(work)s/tmp/proxy;
    fastcgi_temp_path %(work)s/tmp/fastcgi;
    uwsgi_temp_path %(work)s/tmp/uwsgi;
    scgi_temp_path %(work)s/tmp/scgi;
    server {
        listen 127.0.0.1:%(port)d;
        root %(root)s;
    }
}
""" % {"user": user, "work": work, "port": port, "root": root})
    process = subprocess.Popen(["/usr/sbin/nginx", "-p", work + "/", "-c", conf, "-e", os.path.join(work, "nginx-error.log")])
    wait_until(lambda: connects(socket.AF_INET, ("127.0.0.1", port)), 10, "nginx")
    return process, "http://127.0.0.1:%d" % port


class Client:
    """A minimal Wyoming-framed client for earshotd's socket."""

    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(path)
        self.stream = self.sock.makefile("rwb")

    def send(self, kind, data):
        body = json.dumps(data).encode()
        header = json.dumps({"type": kind, "version": "1.7.0", "data_length": len(body)}).encode()
        self.stream.write(header + b"\n" + body)
        self.stream.flush()

    def receive(self):
        line = self.stream.readline()
        if not line:
            fail("earshotd closed the connection")
        header = json.loads(line)
        data = dict(header.get("data") or {})
        if header.get("data_length"):
            data.update(json.loads(self.stream.read(header["data_length"])))
        if header.get("payload_length"):
            self.stream.read(header["payload_length"])
        return header["type"], data

    def call(self, kind, data):
        self.send(kind, data)
        while True:
            reply, body = self.receive()
            if body.get("id") == data["id"] and not reply.endswith(".progress"):
                if reply == "error":
                    fail("%s failed: %s" % (kind, body))
                return body

    def close(self):
        self.sock.close()


def daemon_environment():
    env = dict(os.environ)
    for key in ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID", "LISTEN_FDS", "LISTEN_PID", "JOURNAL_STREAM"):
        env.pop(key, None)
    return env


def run_earshotd(earshotd, work, config, index):
    """One install through a fresh earshotd on empty state/cache dirs; returns seconds."""
    run = os.path.join(work, "earshotd-%d" % index)
    os.makedirs(run)
    sock = os.path.join(run, "earshot.sock")
    log = open(os.path.join(work, "earshotd-%d.log" % index), "w")
    daemon = subprocess.Popen([earshotd, "--user", "--socket", sock, "--state-dir", os.path.join(run, "state"),
                               "--cache-dir", os.path.join(run, "cache"), "--config", config],
                              stdout=log, stderr=log, env=daemon_environment())
    try:
        wait_until(lambda: daemon.poll() is not None or connects(socket.AF_UNIX, sock), 20, "earshotd")
        if daemon.poll() is not None:
            fail("earshotd exited with %s (see %s)" % (daemon.returncode, log.name))
        client = Client(sock)
        client.call("earshot.hello", {"id": "hello", "protocol_version": 1, "app_id": "org.earshot.bench"})
        catalog = client.call("earshot.catalog", {"id": "catalog", "refresh": True})
        if not catalog.get("assets"):
            fail("the catalog did not load: %s" % catalog.get("sources"))
        request = {"id": "install", "modules": [{"kind": "transcriber", "locale": "en-US"}]}
        started = time.monotonic()
        result = client.call("earshot.install", request)
        elapsed = time.monotonic() - started
        if result.get("installed") != ["bench-asset@1"]:
            fail("unexpected install result %s" % result)
        client.close()
        return elapsed
    finally:
        if daemon.poll() is None:
            daemon.send_signal(signal.SIGTERM)
            try:
                daemon.wait(timeout=20)
            except subprocess.TimeoutExpired:
                daemon.kill()
                daemon.wait()
        log.close()
        shutil.rmtree(run, ignore_errors=True)


def run_shell(work, name, index, script, url):
    """One baseline run of `script` (sh, with $1 = download file, $2 = URL, $3 = output dir)."""
    out = os.path.join(work, "%s-%d" % (name, index))
    os.makedirs(out)
    try:
        started = time.monotonic()
        subprocess.run(["sh", "-ec", script, "sh", os.path.join(out, "asset.tar.gz"), url, os.path.join(out, "x")], check=True)
        return time.monotonic() - started
    finally:
        shutil.rmtree(out, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser(description="earshotd install vs curl + tar")
    parser.add_argument("--earshotd", required=True, help="the earshotd binary (release build)")
    parser.add_argument("--size", type=int, default=200, help="MiB of random data in the asset (default 200)")
    parser.add_argument("--runs", type=int, default=3, help="runs per contender; the best counts (default 3)")
    parser.add_argument("--dir", default=default_dir(), help="where the data file is kept and the runs write")
    parser.add_argument("--keep", action="store_true", help="keep the work dir (logs)")
    args = parser.parse_args()
    if args.size <= 0 or args.runs <= 0:
        parser.error("--size and --runs must be positive")
    for tool in ("/usr/sbin/nginx", shutil.which("minisign"), shutil.which("curl"), shutil.which("tar")):
        if not tool or not os.path.exists(tool):
            fail("needs nginx, minisign, curl and tar")

    os.makedirs(args.dir, exist_ok=True)
    archive, sha256, content = ensure_asset(args.dir, args.size)
    size = os.path.getsize(archive)
    work = tempfile.mkdtemp(prefix="install-bench-", dir=args.dir)
    nginx = None
    try:
        root = os.path.join(work, "root")
        os.makedirs(root)
        os.symlink(archive, os.path.join(root, "asset.tar.gz"))
        nginx, base = start_nginx(work, root)
        url = base + "/asset.tar.gz"

        keys = os.path.join(work, "keys")
        os.makedirs(keys)
        subprocess.run(["minisign", "-G", "-W", "-p", os.path.join(keys, "bench.pub"), "-s", os.path.join(work, "bench.key")],
                       check=True, stdout=subprocess.DEVNULL)
        catalog = {
            "format": 1, "version": 1, "assets": [{
                "id": "bench-asset", "version": 1, "kind": "transcriber", "engine": "bench-engine",
                "locales": ["en-US"],
                "capabilities": {"streaming": False, "volatile_results": False, "time_ranges": True,
                                 "alternatives": False, "confidence": False, "content_hints": []},
                "size": size, "installed_size": content + MiB, "sha256": sha256, "urls": [url],
                "format": "tar.gz", "files": {"model": "model.bin"}, "license": "CC0-1.0",
            }],
        }
        with open(os.path.join(root, "catalog.json"), "w") as f:
            json.dump(catalog, f, indent=1)
        subprocess.run(["minisign", "-S", "-s", os.path.join(work, "bench.key"), "-m", os.path.join(root, "catalog.json")],
                       check=True, stdout=subprocess.DEVNULL)
        config = os.path.join(work, "earshotd.conf")
        with open(config, "w") as f:
            f.write("[Catalog]\nURL=%s/catalog.json\nKeysDirectory=%s\n" % (base, keys))

        # Warm nginx's page cache (both contenders then read from memory on the server side).
        with open(archive, "rb") as f:
            while f.read(8 * MiB):
                pass

        baseline = 'curl -sS -o "$1" "$2"; mkdir -p "$3"; tar -xzf "$1" -C "$3"'
        reference = 'curl -sS -o "$1" "$2"; sha256sum "$1" >/dev/null; mkdir -p "$3"; tar -xzf "$1" -C "$3"; sync'
        times = {"earshotd": [], "curl+tar": [], "ref": []}
        for index in range(args.runs):
            times["earshotd"].append(run_earshotd(args.earshotd, work, config, index))
            times["curl+tar"].append(run_shell(work, "curl-tar", index, baseline, url))
            times["ref"].append(run_shell(work, "reference", index, reference, url))

        best = {name: min(values) for name, values in times.items()}
        runs = {name: " ".join("%.3f" % v for v in values) for name, values in times.items()}
        ratio = best["earshotd"] / best["curl+tar"]
        print()
        print("install of a %d MiB asset (%s, %.1f MiB tar.gz) from nginx on loopback, best of %d" % (
            args.size, os.path.basename(args.earshotd), size / MiB, args.runs))
        print("  %-44s %8.3f s   %6.1f MiB/s   runs: %s" % ("earshotd install (request -> result)", best["earshotd"], size / MiB / best["earshotd"], runs["earshotd"]))
        print("  %-44s %8.3f s   %6.1f MiB/s   runs: %s" % ("curl -o + tar -xzf (baseline)", best["curl+tar"], size / MiB / best["curl+tar"], runs["curl+tar"]))
        print("  %-44s %8.3f x   (goal <= 1.2x) %s" % ("ratio earshotd / baseline", ratio, "ok" if ratio <= 1.2 else "MISSED"))
        print("  %-44s %8.3f s   (information only: what earshotd also does)" % ("curl + sha256sum + tar + sync", best["ref"]))
    finally:
        if nginx is not None:
            nginx.send_signal(signal.SIGTERM)
            try:
                nginx.wait(timeout=10)
            except subprocess.TimeoutExpired:
                nginx.kill()
        if args.keep:
            print("work dir kept: " + work)
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
