#!/usr/bin/env python3
"""bench/fixed_heap.py - how much memory an allocator needs for a trace if it
never gives memory back nor moves it: the high-water mark of one address
range served by a classic placement (best fit, first fit, worst fit, with
coalescing), replaying the trace twice in a row as a warm service would.

With one of these placements, this is the footprint of an allocator that
makes no mapping call once warm and keeps blocks in place; set against peak
live it shows how far from "held <= 1.05 x peak live" such an allocator
stays. Blocks still live at the end of a pass are freed before the next (as
a service's request ends), frees of unknown pointers are skipped, and
streams are ignored (a free is reusable at once), which only helps the
placement.

  bench/fixed_heap.py TRACE.csv.gz...
"""
import bisect
import csv
import gzip
import os
import sys

ALIGN = 512


def events(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        for row in csv.DictReader(f):
            yield row["Action"] == "allocate", row["Pointer"], int(row["Size"])


class Heap:
    """One growing address range; free ranges kept by (size, address)."""

    def __init__(self, placement):
        self.by_size = []  # sorted (size, addr)
        self.at = {}       # addr -> size of the free range starting there
        self.ending = {}   # end -> addr of the free range ending there
        self.top = 0
        self.high = 0
        self.placement = placement

    def _unlink(self, addr, size):
        del self.by_size[bisect.bisect_left(self.by_size, (size, addr))]
        del self.at[addr]
        del self.ending[addr + size]

    def _link(self, addr, size):
        if addr in self.ending:
            left = self.ending[addr]
            self._unlink(left, addr - left)
            size += addr - left
            addr = left
        if addr + size in self.at:
            right = self.at[addr + size]
            self._unlink(addr + size, right)
            size += right
        if addr + size == self.top:
            self.top = addr
            return
        self.at[addr] = size
        self.ending[addr + size] = addr
        bisect.insort(self.by_size, (size, addr))

    def _choose(self, n):
        i = bisect.bisect_left(self.by_size, (n, -1))
        if i == len(self.by_size):
            return None
        if self.placement == "best":
            return self.by_size[i]
        if self.placement == "worst":
            return self.by_size[-1]
        return min(self.by_size[i:], key=lambda r: r[1])  # first: lowest address

    def alloc(self, n):
        found = self._choose(n)
        if found:
            size, addr = found
            self._unlink(addr, size)
            if size > n:
                self._link(addr + n, size - n)
            return addr
        addr = self.top
        self.top += n
        self.high = max(self.high, self.top)
        return addr

    def free(self, addr, n):
        self._link(addr, n)


def measure(path):
    evs = list(events(path))
    live = peak = 0
    sizes = {}
    for is_alloc, ptr, size in evs:
        if is_alloc:
            sizes[ptr] = size
            live += size
            peak = max(peak, live)
        elif ptr in sizes:
            live -= sizes.pop(ptr)
    out = {}
    for placement in ("best", "first", "worst"):
        heap, where = Heap(placement), {}
        for _ in range(2):
            for is_alloc, ptr, size in evs:
                if is_alloc:
                    n = -(-size // ALIGN) * ALIGN
                    where[ptr] = (heap.alloc(n), n)
                elif ptr in where:
                    heap.free(*where.pop(ptr))
            for addr, n in where.values():  # what the pass left live
                heap.free(addr, n)
            where.clear()
        out[placement] = heap.high / peak
    return peak, out


def main(paths):
    if not paths:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    print("| trace | peak live MiB | best fit | first fit | worst fit |")
    print("|---|---:|---:|---:|---:|")
    for path in paths:
        peak, r = measure(path)
        print("| %s | %.1f | %.3f | %.3f | %.3f |" % (
            os.path.basename(path).split(".")[0], peak / 2**20, r["best"], r["first"], r["worst"]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
