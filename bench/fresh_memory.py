#!/usr/bin/env python3
"""fresh_memory.py - what fresh memory costs on this machine, and mpc without huge pages.

`mpc rewrite` on a 1 M-node model touches about 1.25 GB of memory it never
had before; the kernel time this takes (docs/perf.md, "Where the system time
goes") depends on the machine, and on whether the memory comes in 4 KiB or
2 MiB pages. Two helpers to measure that:

  python3 bench/fresh_memory.py touch 1250 [--huge]
      maps 1250 MiB, writes one byte per 4 KiB page, and prints the process's
      user and system time and its page faults; --huge asks for transparent
      huge pages first (madvise(MADV_HUGEPAGE), as mpc does for its large blocks)

  python3 bench/fresh_memory.py no-thp -- build/tools/mpc rewrite m.onnx -o o.onnx
      runs a command with transparent huge pages off for it
      (prctl(PR_SET_THP_DISABLE), inherited across exec): the same binary with
      and without huge pages, for an interleaved comparison under /usr/bin/time

Linux only.
"""
import argparse
import ctypes
import mmap
import os
import resource
import sys

PR_SET_THP_DISABLE = 41
PAGE = 4096


def touch(mib, huge):
    size = mib << 20
    mem = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    if huge:
        mem.madvise(mmap.MADV_HUGEPAGE)
    for at in range(0, size, PAGE):
        mem[at] = 1
    use = resource.getrusage(resource.RUSAGE_SELF)
    print(f"{mib} MiB {'2 MiB' if huge else '4 KiB'} pages: user {use.ru_utime:.2f} s "
          f"system {use.ru_stime:.2f} s minor faults {use.ru_minflt}")


def no_thp(cmd):
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0) != 0:
        sys.exit(f"fresh_memory.py: prctl(PR_SET_THP_DISABLE) failed: "
                 f"{os.strerror(ctypes.get_errno())}")
    try:
        os.execvp(cmd[0], cmd)
    except OSError as e:
        sys.exit(f"fresh_memory.py: cannot run '{cmd[0]}': {e.strerror}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="what", required=True)
    t = sub.add_parser("touch", help="map and touch MiB of fresh memory")
    t.add_argument("mib", type=int)
    t.add_argument("--huge", action="store_true", help="advise transparent huge pages")
    n = sub.add_parser("no-thp", help="run a command without transparent huge pages")
    n.add_argument("cmd", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    if a.what == "touch":
        if a.mib <= 0:
            sys.exit("fresh_memory.py: MiB must be positive")
        touch(a.mib, a.huge)
    else:
        cmd = a.cmd[1:] if a.cmd[:1] == ["--"] else a.cmd
        if not cmd:
            sys.exit("fresh_memory.py: no-thp needs a command after --")
        no_thp(cmd)


if __name__ == "__main__":
    main()
