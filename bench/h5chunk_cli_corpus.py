#!/usr/bin/env python3
"""The determinism corpus read by the real `h5chunk` command, twice (issue 38: never nondeterministic,
never a crash of the command).

Writes the corpus's mutants (damaged copies of the seed files of tests/h5chunk/mutation_harness.h,
as MutationFuzz.DamagedFilesReadTheSameEveryTime makes them) with test_h5chunk, then runs
`h5chunk read MUTANT DATASET SELECTION -o OUT` for every mutant, dataset and selection, in two
passes with differently perturbed heaps (MALLOC_PERTURB_), and compares the passes: exit status,
stdout (the JSON line without its time), stderr and the output file's bytes must be equal.
A command killed by a signal, or exiting with a status other than 0 and 1, is a crash; one that
outlives --timeout is a hang.

  nice python3 bench/h5chunk_cli_corpus.py --out /tmp/corpus          # 3,000 mutants from seed 100000
  python3 bench/h5chunk_cli_corpus.py --out /tmp/corpus --count 50    # a quick look

Results: OUT/pass1.jsonl and OUT/pass2.jsonl (one line per read), OUT/summary.json, and the
summary printed; the exit status is 1 when a read differs, crashed or hung.
"""

import argparse
import concurrent.futures
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


def read_once(binary, mutant, dataset, selection, scratch, perturb, timeout):
    out = os.path.join(scratch, "out.bin")
    if os.path.exists(out):
        os.unlink(out)
    env = {**os.environ, "MALLOC_PERTURB_": perturb}
    try:
        p = subprocess.run([binary, "read", mutant["file"], dataset, selection, "-o", out], env=env,
                           capture_output=True, timeout=timeout)
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


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build"))
    ap.add_argument("--out", required=True, help="directory for the mutants and the results")
    ap.add_argument("--first", type=int, default=100000, help="first mutant's seed (the slow test's)")
    ap.add_argument("--count", type=int, default=3000)
    ap.add_argument("--jobs", type=int, default=2, help="commands run at once")
    ap.add_argument("--timeout", type=float, default=120, help="seconds before a command counts as hung")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    binary = os.path.join(args.build, "bin", "h5chunk")
    t0 = time.monotonic()
    mutants = make_corpus(args.build, args.out, args.first, args.count)
    seed_files = sorted({m["seed_file"] for m in mutants})
    print(f"{len(mutants)} mutants of {len(seed_files)} seed files", flush=True)
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
