#!/usr/bin/env python3
"""Writes the seed corpus of fuzz/heap_fuzzer.cpp into fuzz/corpus/.

Each seed is a short operation program in the fuzzer's input format (see the
comment at the top of heap_fuzzer.cpp). The same scenarios are written once per
heap index (byte 0), so the combined heap_fuzzer starts from every heap; the
per-heap binaries ignore byte 0 and read all of them. The output is committed;
re-run this script only when the input format changes:

    python3 fuzz/make_corpus.py          # rewrites fuzz/corpus/*
"""
import hashlib
import pathlib
import random

HEAPS = 5  # entries in ALLOTHEQUE_FUZZ_HEAPS; more does no harm (index is taken modulo the count)

# Opcodes (low 4 bits of the op byte).
ALLOC, FREE, REALLOC, VERIFY, RUN, ALL = 0, 7, 11, 13, 14, 15

# Size classes (low 3 bits of the size byte), see decode_size.
def size_zero():            return [0]
def size_tiny(n):           return [1, n & 63]
def size_small(n):          return [2, n & 0xFF, (n >> 8) & 0x03]
def size_medium(n):         return [3, n & 0xFF, (n >> 8) & 0x3F]
def size_pages(k, delta):   return [4, (k - 1) & 15, (delta + 16) & 31]
def size_threshold(delta):  return [5, (delta + 128) & 0xFF]
def size_large(n16):        return [6, n16 & 0xFF, (n16 >> 8) & 0xFF]
def size_edge(i):           return [7 | (i << 3)]

# Alignment byte, see decode_alignment.
A0, A8, A16, A64, A4096, A8192 = 0, 2, 3, 4, 5, 6
def a_other(i): return 7 | (i << 3)   # 0..8 valid small powers of two, 9.. invalid

# Hint byte (+ operands), see decode_hint.
def h_null():              return [0]
def h_live(i):             return [1, i]
def h_random(addr, shift=0): return [2 | (shift << 6)] + [(addr >> (8 * j)) & 0xFF for j in range(6)]
def h_inside(i, off8):     return [3, i, off8 & 0xFF, (off8 >> 8) & 0xFF]
def h_last():              return [7]


def alloc(size, align=A0, hint=None):
    return [ALLOC] + size + [align] + (hint or h_null())


def scenarios():
    s = {}
    s["empty"] = []
    s["one_tiny"] = alloc(size_tiny(24))
    s["zero"] = alloc(size_zero()) + alloc(size_zero()) + [FREE, 0] + [FREE, 0]
    s["small_churn"] = sum((alloc(size_tiny(8 * i + 1)) for i in range(8)), []) + [FREE, 3, FREE, 1, FREE, 5] + \
        sum((alloc(size_tiny(8 * i + 1)) for i in range(4)), []) + [VERIFY]
    s["size_classes"] = sum((alloc(size_small(n)) for n in (1, 8, 9, 16, 100, 127, 128, 129, 255, 256, 257, 1000)), [])
    s["page_crossing"] = sum((alloc(size_pages(k, d)) for k in (1, 2, 3, 8, 16) for d in (-8, 0, 8)), []) + [VERIFY]
    s["threshold"] = sum((alloc(size_threshold(d)) for d in (-64, -16, -1, 0, 1, 16, 64)), []) + [FREE, 2, FREE, 0]
    s["large"] = alloc(size_large(1)) + alloc(size_large(4096)) + alloc(size_large(65535)) + [FREE, 1] + \
        alloc(size_large(100), A4096) + [VERIFY]
    s["alignments"] = sum((alloc(size_small(40), a) for a in (A0, A8, A16, A64, A4096)), []) + \
        sum((alloc(size_tiny(3), a_other(i)) for i in range(9)), [])
    s["bad_alignment"] = alloc(size_small(64), A8192) + sum((alloc(size_small(64), a_other(i)) for i in range(9, 16)), [])
    s["edges"] = sum((alloc(size_edge(i)) for i in range(23)), []) + [VERIFY]
    s["edges_aligned"] = sum((alloc(size_edge(i), A4096) for i in range(23)), [])
    s["hints_live"] = alloc(size_small(48)) + sum((alloc(size_small(48), A0, h_live(i)) for i in range(6)), [])
    s["hints_random"] = alloc(size_small(48), A0, h_random(0x7F0012345678)) + \
        alloc(size_small(96), A0, h_random(0x000010000000)) + alloc(size_small(200), A0, h_random(0xFFFFFFFFFFFF, 3)) + \
        alloc(size_small(24), A0, h_random(0x0)) + alloc(size_large(10), A0, h_random(0x600000000000))
    s["hints_inside"] = alloc(size_medium(5000)) + sum((alloc(size_tiny(16), A0, h_inside(0, o)) for o in (0, 1, 100, 700)), []) + \
        alloc(size_small(64), A0, h_last())
    s["realloc_grow"] = alloc(size_tiny(8)) + [REALLOC, 0] + size_small(100) + [A0] + [REALLOC, 0] + size_medium(6000) + [A0] + \
        [REALLOC, 0] + size_large(300) + [A64] + [REALLOC, 0] + size_tiny(1) + [A0]
    s["realloc_shrink"] = alloc(size_large(2000)) + [REALLOC, 0] + size_pages(3, 5) + [A4096] + [REALLOC, 0] + size_zero() + [A0]
    s["realloc_bad"] = alloc(size_small(300)) + [REALLOC, 0] + size_edge(20) + [A0] + [REALLOC, 0] + size_small(10) + [A8192] + [VERIFY]
    s["run"] = [RUN, 7] + size_tiny(32) + [A0] + [RUN, 15] + size_small(200) + [A16] + [RUN, 3] + size_large(50) + [A0]
    s["run_mixed"] = alloc(size_tiny(32)) + [RUN, 10] + size_tiny(32) + [A0] + alloc(size_tiny(32)) + [FREE, 0, VERIFY]
    s["deallocate_all"] = alloc(size_tiny(8)) + alloc(size_large(5)) + [ALL, 0] + alloc(size_small(100)) + [ALL, 3] + [VERIFY]
    s["free_several"] = sum((alloc(size_tiny(i)) for i in range(10)), []) + [ALL, 0xC0, 1, 2, 3, 4]
    s["many_small"] = sum((alloc(size_tiny(16)) for _ in range(120)), []) + [FREE, 7] * 60 + [VERIFY]
    s["grow_heap"] = sum((alloc(size_medium(12000)) for _ in range(40)), []) + [VERIFY]
    return s


def random_program(rng, n):
    out = []
    for _ in range(n):
        op = rng.randrange(16)
        out.append(op)
        if op <= 6:
            out += [rng.randrange(256), rng.randrange(256), rng.randrange(256), rng.randrange(256) & 0xF8, rng.randrange(256)]
        elif op <= 10:
            out.append(rng.randrange(256))
        elif op <= 12:
            out += [rng.randrange(256) for _ in range(5)]
        elif op == 14:
            out += [rng.randrange(256) for _ in range(4)]
        elif op == 15:
            out.append(rng.randrange(16, 256))
    return out


def main():
    here = pathlib.Path(__file__).resolve().parent
    corpus = here / "corpus"
    corpus.mkdir(exist_ok=True)
    for old in corpus.iterdir():
        old.unlink()
    rng = random.Random(20261122)
    programs = dict(scenarios())
    for i in range(4):
        programs[f"random{i}"] = random_program(rng, 40 + 20 * i)
    count = 0
    for heap in range(HEAPS):
        # Every scenario for heap 0; the others every fourth, to keep the corpus small.
        for k, (name, body) in enumerate(sorted(programs.items())):
            if heap != 0 and (k + heap) % 4:
                continue
            data = bytes([heap]) + bytes(b & 0xFF for b in body)
            digest = hashlib.sha1(data).hexdigest()[:12]
            (corpus / f"h{heap}_{name}_{digest}").write_bytes(data)
            count += 1
    print(f"wrote {count} seeds to {corpus}")


if __name__ == "__main__":
    main()
