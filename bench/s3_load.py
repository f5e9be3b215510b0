"""The S3 load of bench/gateway.py: botocore worker processes and awscli.

The workers are a script (WORKER) run by Debian's /usr/bin/python3 with its python3-botocore
1.29 (newer botocore sends checksum trailers Ceph 16 refuses), one process per call:

  put       PUTs of `count` objects (a random body of `size` bytes, or the file `src`), keys
            `key` % i, in `threads` threads, no retries
  files     the same writes as files under `dir` (open, write, close), for the FUSE mount
  head      HEADs of the same keys (the gateway computes and stores the ETag of a file made
            through a mount on its first HEAD)
  list      ListObjectsV2 of `prefix` (with `delimiter` or without) page by page, 1000 keys a
            page, as raw HTTP requests signed by botocore; a page's XML is counted, not parsed
  delete    DeleteObjects of every key under `prefix`
  mkbucket  CreateBucket (an existing bucket of the caller's is fine)

worker() runs one and returns its JSON result; workers() runs put/files in several processes
that start together after a barrier. aws() starts Debian's awscli (/usr/bin/aws by default)
with its own configuration file (write_aws_config) and the target's keys only.
make_empty_files() creates the listing's keys as empty files through the mount.
"""

import json
import os
import subprocess
import sys

from gateway_servers import log, popen, reap, sh

# The client processes: run by Debian's python3 with its botocore (see the docstring).
# put/files: objects (or files) first, first+step, ... < count, by `threads` threads, after a
# barrier (prints "ready", waits for a line on stdin); prints one JSON line with the
# monotonic start and end (CLOCK_MONOTONIC is system-wide, so processes compare).
WORKER = r'''
import html, json, os, re, sys, threading, time
mode, a = sys.argv[1], json.loads(sys.argv[2])

def s3client(threads):
    import botocore.session
    from botocore.config import Config
    return botocore.session.get_session().create_client(
        "s3", endpoint_url=a["endpoint"], region_name="us-east-1", aws_access_key_id=a["ak"],
        aws_secret_access_key=a["sk"],
        config=Config(max_pool_connections=threads, retries={"total_max_attempts": 1}, connect_timeout=60,
                      read_timeout=900, s3={"addressing_style": "path"}))

if mode in ("put", "files", "head"):
    idx = list(range(a["first"], a["count"], a["step"]))
    threads = a["threads"]
    if a.get("src"):
        with open(a["src"], "rb") as f:
            data = f.read()
    else:
        data = os.urandom(a["size"]) if a["size"] else b""
    c = s3client(threads) if mode in ("put", "head") else None
    errors, lock = [], threading.Lock()
    def work(k):
        for j in range(k, len(idx), threads):
            key = a["key"] % idx[j]
            try:
                if mode == "head":
                    c.head_object(Bucket=a["bucket"], Key=key)
                elif c:
                    c.put_object(Bucket=a["bucket"], Key=key, Body=data)
                else:
                    with open(os.path.join(a["dir"], key), "wb") as f:
                        f.write(data)
            except Exception as e:
                with lock:
                    errors.append("%s: %r" % (key, e))
    print("ready", flush=True)
    sys.stdin.readline()
    t0 = time.monotonic()
    ts = [threading.Thread(target=work, args=(k,)) for k in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    print(json.dumps({"t0": t0, "t1": time.monotonic(), "n": len(idx), "errors": len(errors),
                      "first_errors": errors[:3]}))
elif mode == "list":
    import http.client, urllib.parse
    from botocore.auth import S3SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials
    cred = Credentials(a["ak"], a["sk"])
    conn = http.client.HTTPConnection(a["endpoint"].split("//", 1)[1], timeout=900)
    q = lambda v: urllib.parse.quote(v, safe="-_.~")
    token, pages, keys, prefixes, first = None, 0, 0, 0, None
    t0 = time.monotonic()
    while True:
        p = {"list-type": "2", "prefix": a["prefix"], "max-keys": "1000"}
        if a["delimiter"]:
            p["delimiter"] = a["delimiter"]
        if token is not None:
            p["continuation-token"] = token
        path = "/%s?%s" % (a["bucket"], "&".join("%s=%s" % (q(k), q(v)) for k, v in sorted(p.items())))
        req = AWSRequest(method="GET", url=a["endpoint"] + path)
        S3SigV4Auth(cred, "s3", "us-east-1").add_auth(req)
        conn.request("GET", path, headers=dict(req.headers.items()))
        r = conn.getresponse()
        body = r.read()
        if r.status != 200:
            sys.exit("page %d: HTTP %d: %s" % (pages + 1, r.status, body[:500]))
        pages += 1
        if first is None:
            first = time.monotonic() - t0
        keys += body.count(b"<Contents>")
        prefixes += body.count(b"<CommonPrefixes>")
        if b"<IsTruncated>true</IsTruncated>" not in body:
            break
        m = re.search(rb"<NextContinuationToken>([^<]*)</NextContinuationToken>", body)
        if not m:
            sys.exit("page %d is truncated but has no NextContinuationToken" % pages)
        token = html.unescape(m.group(1).decode())
    print(json.dumps({"secs": time.monotonic() - t0, "pages": pages, "keys": keys, "prefixes": prefixes,
                      "first": first}))
elif mode == "delete":
    c = s3client(4)
    n = 0
    for page in c.get_paginator("list_objects_v2").paginate(Bucket=a["bucket"], Prefix=a["prefix"]):
        objs = [{"Key": o["Key"]} for o in page.get("Contents", [])]
        if objs:
            r = c.delete_objects(Bucket=a["bucket"], Delete={"Objects": objs, "Quiet": True})
            if r.get("Errors"):
                sys.exit("delete: %s" % r["Errors"][:3])
            n += len(objs)
    print(json.dumps({"deleted": n}))
elif mode == "mkbucket":
    c = s3client(1)
    try:
        c.create_bucket(Bucket=a["bucket"])
    except c.exceptions.BucketAlreadyOwnedByYou:
        pass
    print(json.dumps({}))
'''


def worker(python, mode, args, timeout):
    """One worker process; returns the JSON object it printed last."""
    out = sh(python, "-c", WORKER, mode, json.dumps(args), timeout=timeout)
    return json.loads(out.strip().splitlines()[-1])


def workers(python, mode, args, procs, threads, timeout):
    """put/files/head in `procs` processes of `threads` threads; returns (seconds, errors) from
    the barrier to the last one done."""
    ps = [popen([python, "-c", WORKER, mode, json.dumps(dict(args, first=i, step=procs, threads=threads))],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
          for i in range(procs)]
    for p in ps:
        if p.stdout.readline().strip() != "ready":
            for q in ps:
                q.kill()
            raise RuntimeError("a %s worker failed: %s" % (mode, reap(p, 60)[1][-2000:]))
    outs = []
    for p in ps:
        p.stdin.write("go\n")
        p.stdin.flush()
    for p in ps:
        out, err = reap(p, timeout)
        if p.returncode != 0:
            raise RuntimeError("a %s worker failed: %s" % (mode, err[-2000:]))
        outs.append(json.loads(out.strip().splitlines()[-1]))
    errors = sum(o["errors"] for o in outs)
    if errors:
        log("%s: %d errors, e.g. %s" % (mode, errors, [e for o in outs for e in o["first_errors"]][:3]))
    return max(o["t1"] for o in outs) - min(o["t0"] for o in outs), errors


def write_aws_config(path, chunk, concurrency):
    """An AWS_CONFIG_FILE: multipart threshold and part size `chunk` (awscli's spelling, such
    as 16MB), `concurrency` requests at once per transfer."""
    with open(path, "w") as f:
        f.write("[default]\nregion = us-east-1\ns3 =\n    multipart_threshold = %s\n"
                "    multipart_chunksize = %s\n    max_concurrency = %d\n" % (chunk, chunk, concurrency))
    return path


def aws_env(s3, conf):
    """The environment of awscli for a target (s3: its s3args): none of the caller's AWS_
    variables, the target's keys, and the configuration file `conf`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(AWS_ACCESS_KEY_ID=s3["ak"], AWS_SECRET_ACCESS_KEY=s3["sk"], AWS_DEFAULT_REGION="us-east-1",
               AWS_CONFIG_FILE=conf, AWS_SHARED_CREDENTIALS_FILE="/dev/null", AWS_PAGER="",
               AWS_EC2_METADATA_DISABLED="true")
    return env


def aws(aws_bin, s3, conf, *args):
    """Starts `aws --endpoint-url ENDPOINT ARGS...` against a target; reap() it."""
    return popen([aws_bin, "--endpoint-url", s3["endpoint"]] + list(args), env=aws_env(s3, conf),
                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)


def make_empty_files(d, name, count, procs):
    """Empty files `name` % i for i < count in the folder d (through the mount), made by
    `procs` forked processes; True when all of them succeeded."""
    pids = []
    for p in range(procs):
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                for i in range(p, count, procs):
                    os.close(os.open(os.path.join(d, name % i), os.O_CREAT | os.O_WRONLY, 0o644))
            except BaseException as e:  # noqa: BLE001 - reported through the exit status
                sys.stderr.write("creating keys: %r\n" % e)
                code = 1
            os._exit(code)
        pids.append(pid)
    bad = [pid for pid in pids if os.waitpid(pid, 0)[1] != 0]
    return not bad
