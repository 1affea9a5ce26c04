#!/usr/bin/python3
"""The determinism corpus read by the real `h5chunk` command, twice (issue 38: never nondeterministic,
never a crash of the command).

Writes the corpus's mutants (damaged copies of the seed files of tests/h5chunk/mutation_harness.h,
as MutationFuzz.DamagedFilesReadTheSameEveryTime makes them) with test_h5chunk, then runs
`h5chunk read MUTANT DATASET SELECTION -o OUT` for every mutant, dataset and selection, in two
passes with differently perturbed heaps (MALLOC_PERTURB_), and compares the passes: exit status,
stdout (the JSON line without its time), stderr and the output file's bytes must be equal.
A command killed by a signal, or exiting with a status other than 0 and 1, is a crash; one that
outlives --timeout is a hang.

With --hf, instead of the two passes: the mutants are served by the local Hub (tools/hub_server.py
on loopback, repo datasets/hubfs-corpus/mutants, plain layout, default strict Xet ranges) and every
read runs twice, on the local file and on hf://datasets/hubfs-corpus/mutants/FILE (--endpoint the
local Hub, a fresh --cache-dir per read, so every hf:// read fetches its bytes), and the two must
agree (issue 38: hf:// reads equal the local reads of the same files, or give the same error):
exit status, the JSON line without its time, the output file's bytes, and stderr once the file
name is normalised (the local path and the hf:// URL both become FILE). Stderr that still differs
only in how the open failure is worded ("HDF5 cannot open FILE: " for a path, "FILE is not an
HDF5 file (or is truncated): " for hf://, same cause after it) counts as the same cause, listed
apart as "wording_only".

  nice python3 bench/h5chunk_cli_corpus.py --out /tmp/corpus          # 3,000 mutants from seed 100000
  python3 bench/h5chunk_cli_corpus.py --out /tmp/corpus --count 50    # a quick look
  nice python3 bench/h5chunk_cli_corpus.py --out /tmp/hfc --hf --count 1000 --max-seconds 1200

Results: OUT/pass1.jsonl and OUT/pass2.jsonl (one line per read; with --hf, OUT/hf.jsonl, one line
per local/hf:// pair, written as each finishes), OUT/summary.json, and the summary printed; the
exit status is 1 when a read differs, crashed or hung. --max-seconds stops starting reads after
that long (the summary then covers the reads done).
"""

import argparse
import concurrent.futures
import contextlib
import hashlib
import json
import os
import shutil
import subprocess
import sys
import threading
import time

SELECTIONS = [":", "0", "-1", "1:3"]  # as the corpus test's selections()
PERTURB = {1: "90", 2: "165"}  # 0x5a and 0xa5, as the corpus test's two children


def make_corpus(build, out, first, count):
    corpus = os.path.join(out, "mutants")
    shutil.rmtree(corpus, ignore_errors=True)
    env = {**os.environ, "H5CHUNK_CORPUS_KEEP": corpus, "H5CHUNK_CORPUS_WRITE_ONLY": "1",
           "H5CHUNK_CORPUS_SEED": str(first), "H5CHUNK_CORPUS_COUNT": str(count)}
    subprocess.run([os.path.join(build, "bin", "test_h5chunk"),
                    "--gtest_filter=MutationFuzz.DamagedFilesReadTheSameEveryTime"],
                   env=env, check=True, stdout=subprocess.DEVNULL)
    mutants = []
    with open(os.path.join(corpus, "corpus.tsv")) as f:
        for line in f:
            name, seed_file, datasets, what = line.rstrip("\n").split("\t", 3)
            mutants.append({"file": os.path.join(corpus, name), "seed_file": seed_file,
                            "datasets": datasets.split(","), "what": what})
    return mutants


def read_once(binary, mutant, dataset, selection, scratch, perturb, timeout, source=None, extra=()):
    out = os.path.join(scratch, "out.bin")
    if os.path.exists(out):
        os.unlink(out)
    env = {**os.environ, "MALLOC_PERTURB_": perturb}
    try:
        p = subprocess.run([binary, "read", source or mutant["file"], dataset, selection, "-o", out, *extra],
                           env=env, capture_output=True, timeout=timeout)
        code, stdout, stderr = p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired as e:
        code, stdout, stderr = "hang", e.stdout or b"", e.stderr or b""
    line = stdout.decode("utf-8", "replace").strip()
    try:
        j = json.loads(line)
        j.pop("ms", None)
        line = json.dumps(j, sort_keys=True)
    except ValueError:
        pass
    digest = None
    if os.path.exists(out):
        with open(out, "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()
    return {"file": os.path.basename(mutant["file"]), "dataset": dataset, "selection": selection, "code": code,
            "stdout": line, "stderr": stderr.decode("utf-8", "replace"), "sha256": digest}


def run_pass(binary, mutants, out, number, jobs, timeout):
    """Every read of the corpus; returns (records by key, wall seconds)."""
    reads = [(m, d, s) for m in mutants for d in m["datasets"] for s in SELECTIONS]
    scratch_of = {}
    lock = threading.Lock()

    def scratch():
        t = threading.get_ident()
        with lock:
            if t not in scratch_of:
                scratch_of[t] = os.path.join(out, f"scratch{number}-{len(scratch_of)}")
                os.makedirs(scratch_of[t], exist_ok=True)
            return scratch_of[t]

    start = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        results = list(pool.map(lambda r: read_once(binary, *r, scratch(), PERTURB[number], timeout), reads))
    seconds = time.monotonic() - start
    with open(os.path.join(out, f"pass{number}.jsonl"), "w") as f:
        for r in results:
            f.write(json.dumps(r, sort_keys=True) + "\n")
    return {(r["file"], r["dataset"], r["selection"]): r for r in results}, seconds


def crashed(r):
    return r["code"] != "hang" and r["code"] not in (0, 1)


HF_REPO = "datasets/hubfs-corpus/mutants"
# The one place a path and an hf:// read of the same bad file word their failure differently
# (core/h5chunk/file.cc: File::open of a path asks H5Fis_hdf5 first, of a source it does not).
OPEN_WORDING = [("HDF5 cannot open 'FILE': ", "cannot open FILE: "),
                ("'FILE' is not an HDF5 file (or is truncated): ", "cannot open FILE: ")]


@contextlib.contextmanager
def local_hub(out, mutants):
    """The mutants, hard-linked into a plain repo, served by tools/hub_server.py on loopback."""
    root = os.path.join(out, "hub")
    shutil.rmtree(root, ignore_errors=True)
    repo = os.path.join(root, HF_REPO)
    os.makedirs(repo)
    for m in mutants:
        os.link(m["file"], os.path.join(repo, os.path.basename(m["file"])))
    server = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools", "hub_server.py")
    proc = subprocess.Popen(["/usr/bin/python3", server, "--root", root, "--host", "127.0.0.1",
                             "--exit-on-stdin-eof"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=open(os.path.join(out, "hub.log"), "w"), text=True)
    try:
        line = proc.stdout.readline().split()
        if len(line) != 4 or line[0] != "listening":
            raise RuntimeError(f"hub server did not start: {line}, see {out}/hub.log")
        yield line[1]
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def normalised_stderr(r, name):
    """Stderr with the file's name (a path or an hf:// URL) as FILE."""
    return r["stderr"].replace(name, "FILE")


def cause(text):
    for wording, common in OPEN_WORDING:
        text = text.replace(wording, common)
    return text


def compare_pair(local, remote, local_name, hf_name):
    """'equal', 'wording_only' (same cause, the open failure worded differently) or 'differs'."""
    if any(local[f] != remote[f] for f in ("code", "stdout", "sha256")):
        return "differs"
    a, b = normalised_stderr(local, local_name), normalised_stderr(remote, hf_name)
    if a == b:
        return "equal"
    return "wording_only" if cause(a) == cause(b) else "differs"


def run_hf(binary, mutants, out, jobs, timeout, max_seconds):
    """Every read on the local file and over hf://; returns (pair records, wall seconds, stopped early)."""
    reads = [(m, d, s) for m in mutants for d in m["datasets"] for s in SELECTIONS]
    deadline = time.monotonic() + max_seconds if max_seconds else None
    lock = threading.Lock()
    results = []
    log = open(os.path.join(out, "hf.jsonl"), "w")
    with local_hub(out, mutants) as endpoint:
        def pair(index, read):
            if deadline and time.monotonic() > deadline:
                return
            m, d, s = read
            scratch = os.path.join(out, f"scratch-hf-{threading.get_ident()}")
            os.makedirs(scratch, exist_ok=True)
            local = read_once(binary, m, d, s, scratch, PERTURB[1], timeout)
            cache = os.path.join(scratch, "cache")
            shutil.rmtree(cache, ignore_errors=True)
            url = f"hf://{HF_REPO}/{os.path.basename(m['file'])}"
            remote = read_once(binary, m, d, s, scratch, PERTURB[1], timeout, source=url,
                               extra=("--endpoint", endpoint, "--cache-dir", cache))
            shutil.rmtree(cache, ignore_errors=True)
            verdict = compare_pair(local, remote, m["file"], url)
            record = {"index": index, "file": local["file"], "dataset": d, "selection": s, "verdict": verdict,
                      "local": {f: local[f] for f in ("code", "stdout", "stderr", "sha256")},
                      "hf": {f: remote[f] for f in ("code", "stdout", "stderr", "sha256")}}
            with lock:
                results.append(record)
                log.write(json.dumps(record, sort_keys=True) + "\n")
                log.flush()

        start = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
            list(pool.map(lambda ir: pair(*ir), enumerate(reads)))
        seconds = time.monotonic() - start
    log.close()
    return sorted(results, key=lambda r: r["index"]), seconds, len(results) < len(reads)


def hf_summary(args, mutants, results, seconds, stopped, t0):
    what = {os.path.basename(m["file"]): m["what"] for m in mutants}
    files = {r["file"] for r in results}
    by = lambda v: [r for r in results if r["verdict"] == v]  # noqa: E731
    crashes = [r for r in results if any(crashed(r[k]) for k in ("local", "hf"))]
    hangs = [r for r in results if any(r[k]["code"] == "hang" for k in ("local", "hf"))]
    return {
        "mutants_read": len(files), "mutants_written": len(mutants), "first_seed": args.first,
        "stopped_by_max_seconds": stopped, "reads_compared": len(results),
        "returned_data": sum(r["local"]["code"] == 0 for r in results),
        "errors": sum(r["local"]["code"] == 1 for r in results),
        "equal": len(by("equal")), "wording_only": len(by("wording_only")), "differing": len(by("differs")),
        "crashes": len(crashes), "hangs": len(hangs),
        "hf_seconds": round(seconds), "wall_seconds": round(time.monotonic() - t0),
        "differing_reads": [{**r, "mutant": what[r["file"]]} for r in by("differs")[:100]],
        "wording_only_reads": [{"read": [r["file"], r["dataset"], r["selection"]], "mutant": what[r["file"]]}
                               for r in by("wording_only")[:100]],
        "crashed_reads": [{**r, "mutant": what[r["file"]]} for r in crashes[:50]],
        "hung_reads": [{**r, "mutant": what[r["file"]]} for r in hangs[:50]],
    }


def main_hf(args, binary, mutants, t0):
    results, seconds, stopped = run_hf(binary, mutants, args.out, args.jobs, args.timeout, args.max_seconds)
    summary = hf_summary(args, mutants, results, seconds, stopped, t0)
    with open(os.path.join(args.out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    print(json.dumps({k: v for k, v in summary.items() if not k.endswith("_reads")}))
    for r in summary["differing_reads"][:10]:
        print("differs:", r["file"], r["dataset"], r["selection"], r["local"]["code"], r["hf"]["code"])
    return 1 if summary["differing"] or summary["crashes"] or summary["hangs"] else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build"))
    ap.add_argument("--out", required=True, help="directory for the mutants and the results")
    ap.add_argument("--first", type=int, default=100000, help="first mutant's seed (the slow test's)")
    ap.add_argument("--count", type=int, default=3000)
    ap.add_argument("--jobs", type=int, default=2, help="commands run at once")
    ap.add_argument("--timeout", type=float, default=120, help="seconds before a command counts as hung")
    ap.add_argument("--hf", action="store_true", help="compare each local read with the same read over hf://")
    ap.add_argument("--max-seconds", type=float, default=0, help="--hf: stop starting reads after this long")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    binary = os.path.join(args.build, "bin", "h5chunk")
    t0 = time.monotonic()
    mutants = make_corpus(args.build, args.out, args.first, args.count)
    seed_files = sorted({m["seed_file"] for m in mutants})
    print(f"{len(mutants)} mutants of {len(seed_files)} seed files", flush=True)
    if args.hf:
        return main_hf(args, binary, mutants, t0)
    first, first_s = run_pass(binary, mutants, args.out, 1, args.jobs, args.timeout)
    print(f"pass 1: {len(first)} reads in {first_s:.0f} s", flush=True)
    second, second_s = run_pass(binary, mutants, args.out, 2, args.jobs, args.timeout)
    print(f"pass 2: {len(second)} reads in {second_s:.0f} s", flush=True)

    fields = ("code", "stdout", "stderr", "sha256")
    differing = [k for k in first if any(first[k][f] != second.get(k, {}).get(f) for f in fields)]
    crashes = [k for k, r in list(first.items()) + list(second.items()) if crashed(r)]
    hangs = [k for k, r in list(first.items()) + list(second.items()) if r["code"] == "hang"]
    what = {os.path.basename(m["file"]): m["what"] for m in mutants}
    summary = {
        "mutants": len(mutants), "seed_files": len(seed_files), "first_seed": args.first,
        "reads_per_pass": len(first), "returned_data": sum(r["code"] == 0 for r in first.values()),
        "errors": sum(r["code"] == 1 for r in first.values()),
        "differing": len(differing), "crashes": len(crashes), "hangs": len(hangs),
        "pass_seconds": [round(first_s), round(second_s)], "wall_seconds": round(time.monotonic() - t0),
        "differing_reads": [{"read": list(k), "mutant": what[k[0]],
                             "pass1": {f: first[k][f] for f in fields},
                             "pass2": {f: second.get(k, {}).get(f) for f in fields}} for k in differing[:50]],
        "crashed_reads": [{"read": list(k), "mutant": what[k[0]]} for k in crashes[:50]],
        "hung_reads": [{"read": list(k), "mutant": what[k[0]]} for k in hangs[:50]],
    }
    with open(os.path.join(args.out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    print(json.dumps({k: v for k, v in summary.items() if not k.endswith("_reads")}))
    for k in differing[:10]:
        print("differs:", k, what[k[0]])
    for k in crashes[:10]:
        print("crashed:", k, what[k[0]])
    return 1 if differing or crashes or hangs else 0


if __name__ == "__main__":
    sys.exit(main())
