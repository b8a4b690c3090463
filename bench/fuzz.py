"""Fuzz campaign: random damage to segment files and Parquet dumps must never crash a job or lose a count.

    .venv/bin/python bench/fuzz.py                      # 10,000 damages through the pure path + 12 through the CLI
    .venv/bin/python bench/fuzz.py --damages 500 --cli 0

Two simulated histories (uncompressed and zstd batches, several segments per partition, a Parquet dump each) are
damaged at random: truncations, bit flips, zeroed blocks, garbage overwrites, swapped adjacent batches,
duplicated files (a second broker's copy, a copy under a Kafka name, a backup copy) and garbage files (Kafka-named
and not), alone or two and three at once.

* **Pure path** (most damages): the damaged partition is planned and read exactly as the ``kafka-segments`` source
  does it (``segments_spark.plan`` then ``read_arrow`` per range) and every Arrow batch goes through the codec's
  ``decode_batch``. Checked: no exception but a ``UserError`` (what the CLI prints as one line, exit 2), and
  ``read + records_lost == records on disk`` by offsets. "On disk" is the original partition's records, less
  the batches a truncation removed: from a partition's last segment a batch counts while the 27 header bytes
  that state its offsets are still there; a rolled segment cut inside a batch still states (by the next
  segment's base offset) which offsets it held, one cut exactly at a batch boundary looks like a compacted
  segment and holds only the batches before the cut. Where the damage destroyed the final batch header of a partition, no
  byte left says how many records it held: those inputs are counted separately ("tail header destroyed"), and
  there ``read + records_lost <= on disk`` is what is checked.
* **CLI path** (``--cli`` runs, alternating ``run`` and ``decode``, in one process with one local Spark session):
  damaged copies of the whole segment dir or of the Parquet dump through ``offsets_audit.cli.main``. Checked:
  exit code 0 or 2, no exception escaping (a traceback), and for segment runs the summary's
  ``read + records_lost`` against the records on disk.

Figures are printed at the end; a non-zero exit means a check failed.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import random
import shutil
import struct
import sys
import tempfile
import time
import traceback
from collections import Counter
from pathlib import Path

KINDS = ("truncate", "bit_flips", "zero_block", "garbage_overwrite", "swap_batches", "duplicate_file",
         "garbage_file", "several")
HEADER_OFFSET_FIELDS = 27  # base offset .. last offset delta of a v2 batch header


def make_histories(root: Path) -> list[Path]:
    from offsets_audit.simulate import simulate

    out = []
    for name, compression in (("plain", "none"), ("zstd", "zstd")):
        target = root / f"{name}-16k"
        if not (target / "segments").is_dir():
            simulate(target, groups=6, hours=0.15, partitions=3, seed=13, compression=compression,
                     segment_bytes=16 * 1024)
        out.append(target)
    return out


def batch_extents(data: bytes) -> list[tuple[int, int]]:
    out, pos = [], 0
    while pos + 12 <= len(data):
        (length,) = struct.unpack_from(">i", data, pos + 8)
        if length <= 0 or pos + 12 + length > len(data):
            break  # already damaged here
        out.append((pos, pos + 12 + length))
        pos += 12 + length
    return out


class Partition:
    """One clean partition folder: its segment files (bytes), batch extents and records per batch."""

    def __init__(self, folder: Path):
        from offsets_audit.sources.segments import iter_batches

        self.folder = folder
        self.files = sorted(folder.glob("*.log"))
        self.data = {f.name: f.read_bytes() for f in self.files}
        self.batches = {f.name: [(b.position, b.position + b.size, len(b.records)) for b in iter_batches(f)]
                        for f in self.files}
        self.records = sum(n for batches in self.batches.values() for _, _, n in batches)
        self.last = self.files[-1].name


def damage(rng: random.Random, part: Partition, kind: str, out: Path) -> dict:
    """Write a damaged copy of ``part`` under ``out``; return what the truth calculation needs."""
    folder = out / part.folder.name
    folder.mkdir(parents=True)
    data = {name: bytearray(b) for name, b in part.data.items()}
    info = {"kind": kind, "truncated": {}, "tail_header": False, "base_offset_field": False, "extra": []}
    kinds = [rng.choice(KINDS[:-1]) for _ in range(rng.randint(2, 3))] if kind == "several" else [kind]
    for k in kinds:
        name = rng.choice(sorted(data))
        buf = data[name]
        if not buf:
            continue
        final_start = part.batches[part.last][-1][0] if part.batches[part.last] else 0
        touched = None
        if k == "truncate":
            cut = rng.randrange(0, len(buf))
            del buf[cut:]
            info["truncated"][name] = min(cut, info["truncated"].get(name, cut))
        elif k == "bit_flips":
            spots = [rng.randrange(len(buf)) for _ in range(rng.randint(1, 4))]
            for spot in spots:
                buf[spot] ^= 1 << rng.randrange(8)
            touched = spots
        elif k in ("zero_block", "garbage_overwrite"):
            size = rng.choice((16, 61, 512, 4096))
            start = rng.randrange(len(buf))
            block = bytes(size) if k == "zero_block" else rng.randbytes(size)
            buf[start:start + size] = block[:len(buf) - start]
            touched = range(start, min(start + size, len(buf)))
        elif k == "swap_batches":
            extents = batch_extents(bytes(buf))
            if len(extents) >= 2:
                i = rng.randrange(len(extents) - 1)
                (a0, a1), (b0, b1) = extents[i], extents[i + 1]
                if b1 <= len(buf):
                    buf[a0:b1] = buf[b0:b1] + buf[a0:a1]
                    touched = range(a0, b1) if name == part.last and b1 >= final_start else None
        elif k == "duplicate_file":
            how = rng.choice(("other_broker", "kafka_name", "backup"))
            info["extra"].append((how, name))
        elif k == "garbage_file":
            how = rng.choice(("kafka_name_after_end", "notes"))
            info["extra"].append((how, rng.randbytes(rng.randint(1, 3000))))
        if touched is not None and name == part.last and any(final_start <= t < final_start + 61 for t in touched):
            info["tail_header"] = True
        if touched is not None and k != "swap_batches":
            starts = [start for start, _, _ in part.batches[name]]
            if any(0 <= t - start < 8 for t in touched for start in starts if start <= t):
                info["base_offset_field"] = True
    info["untouched"] = {}
    for name, buf in data.items():
        (folder / name).write_bytes(bytes(buf))
        if buf == part.data[name]:
            info["untouched"][str(folder / name)] = sum(n for _, _, n in part.batches[name])
    for how, what in info["extra"]:
        if how == "other_broker":
            copy = out / "broker-2" / part.folder.name
            copy.mkdir(parents=True, exist_ok=True)
            (copy / what).write_bytes(bytes(data[what]))
        elif how == "kafka_name":
            base = int(what[:20]) + 1
            (folder / f"{base:020d}.log").write_bytes(bytes(data[what]))
        elif how == "backup":
            (folder / f"backup-of-{what}").write_bytes(bytes(data[what]))
        elif how == "kafka_name_after_end":
            (folder / f"{10 ** 12:020d}.log").write_bytes(what)
        elif how == "notes":
            (folder / "notes.log").write_bytes(what)
    return info


def on_disk(part: Partition, info: dict) -> int:
    """Records the damaged partition still holds, by offsets (see the module docstring)."""
    total = 0
    for name, batches in part.batches.items():
        cut = info["truncated"].get(name)
        inside = cut is not None and any(start < cut < end for start, end, _ in batches)
        if cut is None or (name != part.last and inside):
            # a cut inside a batch of a rolled segment: the offsets up to the next segment are counted lost
            total += sum(n for _, _, n in batches)
            continue
        if name != part.last:  # cut at a batch boundary: the batches after it are gone, as compaction leaves it
            total += sum(n for _, end, n in batches if end <= cut)
            continue
        for start, end, n in batches:
            if end <= cut or cut - start >= HEADER_OFFSET_FIELDS:
                total += n
            if cut - start > 0 and cut - start < HEADER_OFFSET_FIELDS:
                info["tail_header"] = True
    return total


def read_pure(root: Path, decode: bool = True, untouched: dict | None = None) -> tuple[int, int]:
    """``(records read, records_lost)`` of a damaged input through plan -> read_arrow (-> decode_batch).

    The whole input is planned (names, overlaps, ranges); files in ``untouched`` (path -> records), byte for byte
    the clean ones, are not read again: their records count as read.
    """
    from offsets_audit.codec.spark import decode_batch
    from offsets_audit.sources.segments_spark import plan, read_arrow

    ranges, _ = plan(str(root))
    untouched = untouched or {}
    read = lost = 0
    for path in {r.path for r in ranges} & set(untouched):
        read += untouched[path]
    for r in ranges:
        if r.path in untouched:
            continue
        for batch in read_arrow(r.path, r.partition, start=r.start, end=r.end, previous_batch=r.previous_batch,
                                next_base_offset=r.next_base_offset):
            columns = (decode_batch(batch) if decode else batch).to_pydict()
            for code, n in zip(columns["read_error_code"], columns["records_lost"]):
                if code is None:
                    read += 1
                else:
                    lost += n or 0
    return read, lost


def input_rng(seed: int, i: int) -> random.Random:
    """The random source of damaged input ``i``: its own, so one input is re-run alone (``--only i``)."""
    return random.Random(f"{seed}:{i}")


def pure_campaign(histories: list[Path], damages: int, seed: int, scratch: Path, decode_every: int = 1,
                  only: set[int] | None = None, keep: Path | None = None) -> dict:
    from offsets_audit.errors import UserError

    partitions = [Partition(f) for h in histories for f in sorted((h / "segments").iterdir()) if f.is_dir()]
    figures = Counter()
    failures = []
    inexact = []  # (input, why, read, lost, on disk) of the inputs counted as not exact but explained
    started = time.perf_counter()
    for i in (range(damages) if only is None else sorted(only)):
        rng = input_rng(seed, i)
        part = rng.choice(partitions)
        kind = KINDS[i % len(KINDS)]
        work = scratch / f"d{i}"
        info = damage(rng, part, kind, work)
        truth = on_disk(part, info)
        figures[f"kind:{kind}"] += 1
        try:
            read, lost = read_pure(work, decode=i % decode_every == 0, untouched=info["untouched"])
        except UserError as exc:
            figures["user_error (exit 2)"] += 1
            if not info["extra"] or all(how in ("backup", "notes", "kafka_name_after_end") for how, _ in info["extra"]):
                failures.append((i, kind, f"unexpected UserError: {exc}"))
                print("  FAIL", failures[-1], file=sys.stderr, flush=True)
            shutil.rmtree(work)
            continue
        except Exception:  # noqa: BLE001 - a traceback is what the campaign looks for
            figures["traceback"] += 1
            failures.append((i, kind, traceback.format_exc(limit=3)))
            print("  FAIL", failures[-1], file=sys.stderr, flush=True)
            shutil.rmtree(work)
            continue
        figures["read"] += read
        figures["records_lost"] += lost
        figures["on_disk"] += truth
        if read + lost == truth:
            figures["exact"] += 1
        elif info["tail_header"] and read + lost <= truth:
            figures["tail header destroyed"] += 1
            inexact.append((i, "tail header destroyed", read, lost, truth))
        elif info["base_offset_field"]:
            figures["base offset field damaged"] += 1
            inexact.append((i, "base offset field damaged", read, lost, truth))
        else:
            figures["count mismatch"] += 1
            failures.append((i, kind, f"read {read} + lost {lost} != on disk {truth} ({info['kind']}, "
                                      f"truncated {info['truncated']})"))
            print("  FAIL", failures[-1], file=sys.stderr, flush=True)
        if keep is None:
            shutil.rmtree(work)
        else:
            shutil.rmtree(keep / work.name, ignore_errors=True)
            shutil.move(str(work), str(keep / work.name))
        if (i + 1) % 1000 == 0:
            print(f"  ... {i + 1:,} damaged inputs, {time.perf_counter() - started:.0f} s, {len(failures)} failures",
                  file=sys.stderr, flush=True)
    figures["seconds"] = round(time.perf_counter() - started, 1)
    return {"figures": figures, "failures": failures, "inexact": inexact}


def cli_campaign(histories: list[Path], runs: int, seed: int, scratch: Path) -> dict:
    from offsets_audit.cli import main

    rng = random.Random(seed + 1)
    figures = Counter()
    failures = []
    started = time.perf_counter()
    for i in range(runs):
        history = histories[i % len(histories)]
        work = scratch / f"cli{i}"
        command = "run" if i % 2 == 0 else "decode"
        if (i // 2) % 2 == 0:  # segments: damage one partition, keep the others
            parts = [Partition(f) for f in sorted((history / "segments").iterdir()) if f.is_dir()]
            target = rng.choice(parts)
            kind = rng.choice(KINDS)
            info = damage(rng, target, kind, work / "input")
            truth = on_disk(target, info) + sum(p.records for p in parts if p is not target)
            for p in parts:
                if p is not target:
                    shutil.copytree(p.folder, work / "input" / p.folder.name)
            fmt = "segments"
        else:  # Parquet dump: truncate, flip, zero or add files
            shutil.copytree(history / "parquet", work / "input")
            files = sorted((work / "input").rglob("*.parquet"))
            victim = rng.choice(files)
            kind = rng.choice(("truncate", "bit_flips", "zero_block", "garbage_file", "duplicate_file"))
            data = bytearray(victim.read_bytes())
            if kind == "truncate":
                del data[rng.randrange(len(data)):]
            elif kind == "bit_flips":
                data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
            elif kind == "zero_block":
                start = rng.randrange(len(data))
                data[start:start + 512] = bytes(len(data[start:start + 512]))
            victim.write_bytes(bytes(data))
            if kind == "garbage_file":
                (victim.parent / "part-99999.parquet").write_bytes(rng.randbytes(2000))
            elif kind == "duplicate_file":
                shutil.copy(victim, victim.with_name("part-00000-copy.parquet"))
            truth, fmt, info = None, "parquet", {"tail_header": False}
        out = work / "out"
        argv = [command, "--input", str(work / "input"), "--input-format", fmt, "--output", str(out)]
        if command == "run":
            argv += ["--run-id", "fuzz"]
        err = io.StringIO()
        try:
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
                code = main(argv)
        except SystemExit as exc:
            code = exc.code
        except Exception:  # noqa: BLE001
            figures["traceback"] += 1
            failures.append((i, f"{command} {fmt} {kind}", traceback.format_exc(limit=3)))
            continue
        figures[f"exit {code}"] += 1
        figures[f"{command} {fmt}"] += 1
        if code not in (0, 2):
            failures.append((i, f"{command} {fmt} {kind}", f"exit {code}: {err.getvalue()[-500:]}"))
        if code == 2 and len([line for line in err.getvalue().splitlines() if line.startswith("offsets-audit: error")]) != 1:
            failures.append((i, f"{command} {fmt} {kind}", "exit 2 without a one-line error"))
        if code == 0 and command == "run" and truth is not None:
            records = json.loads((out / "summary" / "fuzz.json").read_text())["records"]
            total = records["read"] + records["records_lost"]
            if total == truth:
                figures["cli exact"] += 1
            elif info["tail_header"] and total <= truth:
                figures["cli tail header destroyed"] += 1
            else:
                failures.append((i, f"{command} {fmt} {kind}", f"read+lost {total} != on disk {truth}"))
        shutil.rmtree(work, ignore_errors=True)
    figures["seconds"] = round(time.perf_counter() - started, 1)
    return {"figures": figures, "failures": failures}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--damages", type=int, default=10_000, help="damaged inputs through the pure path")
    parser.add_argument("--cli", type=int, default=12, help="damaged inputs through the real CLI and Spark")
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--decode-every", type=int, default=10,
                        help="also run the codec's decode_batch on every Nth damaged input (the reader on all)")
    parser.add_argument("--only", type=lambda text: {int(i) for i in text.split(",")},
                        help="re-run only these damaged inputs of the pure path (comma-separated numbers, as FAIL "
                             "lines print them)")
    parser.add_argument("--keep", type=Path, help="keep each damaged input of the pure path under this folder")
    parser.add_argument("--dir", default=os.path.join(tempfile.gettempdir(), "offsets-audit-fuzz"),
                        help="where the clean histories are generated once (kept between runs)")
    args = parser.parse_args(argv)
    histories = make_histories(Path(args.dir))
    failed = 0
    figures: dict = {"seed": args.seed, "damages": len(args.only) if args.only else args.damages, "cli_runs": args.cli}
    shm = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
    with tempfile.TemporaryDirectory(prefix="fuzz-", dir=shm) as scratch:
        if args.keep:
            args.keep.mkdir(parents=True, exist_ok=True)
        pure = pure_campaign(histories, args.damages, args.seed, Path(scratch), args.decode_every, args.only,
                             args.keep)
        f = pure["figures"]
        figures["pure"] = dict(f)
        print(f"pure path: {len(args.only) if args.only else args.damages:,} damaged inputs in {f['seconds']} s (decode_batch on every "
              f"{args.decode_every}): {f['traceback']} tracebacks, "
              f"{f['user_error (exit 2)']} one-line errors (exit 2), {f['exact']:,} with read + records_lost == "
              f"records on disk, {f['tail header destroyed']} with the final batch header destroyed "
              f"(read + lost <= on disk), {f['base offset field damaged']} with a batch's base offset field damaged "
              f"(not covered by Kafka's CRC), {f['count mismatch']} mismatches")
        print("  by kind: " + ", ".join(f"{k[5:]} {v}" for k, v in sorted(f.items()) if k.startswith("kind:")))
        print(f"  records: read {f['read']:,} + lost {f['records_lost']:,} of {f['on_disk']:,} on disk")
        for i, why, read, lost, truth in pure["inexact"]:
            print(f"  input {i}: {why}: read {read} + lost {lost} of {truth} on disk")
        failed += len(pure["failures"])
        for failure in pure["failures"][:10]:
            print("  FAIL", failure)
        if pure["failures"]:
            numbers = ",".join(str(failure[0]) for failure in pure["failures"])
            print(f"  re-run them alone: bench/fuzz.py --seed {args.seed} --cli 0 --only {numbers} --keep DIR")
        if args.cli:
            cli = cli_campaign(histories, args.cli, args.seed, Path(scratch))
            c = cli["figures"]
            figures["cli"] = dict(c)
            exits = ", ".join(f"{k} {v}" for k, v in sorted(c.items()) if k.startswith("exit"))
            print(f"CLI path: {args.cli} damaged inputs through run/decode with local Spark in {c['seconds']} s: "
                  f"{c['traceback']} tracebacks; {exits}; segment runs exact {c['cli exact']}, "
                  f"final batch header destroyed {c['cli tail header destroyed']}")
            failed += len(cli["failures"])
            for failure in cli["failures"][:10]:
                print("  FAIL", failure)
    print("OK" if not failed else f"{failed} FAILED")
    from results import record  # bench/ is this script's folder, first on sys.path

    record("fuzz", {**figures, "failed": failed})
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
