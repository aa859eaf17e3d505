// A shared object for test_trace_summary's "stripped code" check (built
// without debug info, then stripped by tools/trace/tests/CMakeLists.txt):
// one exported function, then a static one, in one section and in this
// order. Stripped, the static function has no symbol left, and addr2line
// names every address in it after the exported function before it — which
// ends long before. The summary must say module+offset instead.
extern "C" {

__attribute__((visibility("default"), noinline, section(".text.atq_probe"))) int atq_probe_exported(int x) {
    return x * 3 + 1;
}

// Big enough that its middle lies well past the exported function's end.
__attribute__((noinline, used, section(".text.atq_probe"))) static int atq_probe_hidden(int x) {
    int s = 0;
    for (int i = 0; i < x; ++i) {
        s += atq_probe_exported(i) ^ (s >> 3);
        s = s * 7 + (i & 5);
        if (s > 1000000) s -= x * 11;
        s ^= atq_probe_exported(s & 0xff);
    }
    return s;
}

}
