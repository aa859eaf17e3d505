// replay_trace_gen OUT [--corrupt | --truncated | --huge | --sparse] [--scale N]
//
// Writes a synthetic allocation trace (trace/builder.hpp) for the replay tests:
// a simulated malloc (16-byte classes, LIFO free lists, a bump pointer) serves
// a program that builds trees and lists (children allocated next to their
// parents), grows buffers with realloc, churns random sizes, makes a few large
// and over-aligned blocks, frees unknown addresses and NULL, has one failed
// allocation, a second thread, and leaves some objects live at exit.
// --corrupt flips one byte inside an event block (checksum mismatch);
// --truncated drops the END record and cuts the last record short;
// --huge adds a live 2^45-byte block (more than any test machine has);
// --sparse a 1 GiB buffer live from the start to the end (which the traced
// program would have barely used: the replay must not write all of it).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <allotheque/trace/builder.hpp>

namespace tr = allotheque::trace;

namespace {

// A fake address space with malloc-like reuse.
struct fake_malloc {
    std::uint64_t bump = 0x5555'0000'0000ull;
    std::map<std::uint64_t, std::vector<std::uint64_t>> free_lists;  // class -> addresses
    std::map<std::uint64_t, std::uint64_t> cls_of;
    static std::uint64_t cls(std::uint64_t n) { return n < 16 ? 16 : (n + 15) / 16 * 16; }
    std::uint64_t get(std::uint64_t n, std::uint64_t align = 16) {
        const auto c = cls(n);
        auto& fl = free_lists[c];
        std::uint64_t a;
        if (align <= 16 && !fl.empty()) {
            a = fl.back();
            fl.pop_back();
        } else {
            bump = (bump + align - 1) / align * align;
            a = bump;
            bump += c;
        }
        cls_of[a] = c;
        return a;
    }
    void put(std::uint64_t a) {
        auto it = cls_of.find(a);
        if (it == cls_of.end()) return;
        free_lists[it->second].push_back(a);
        cls_of.erase(it);
    }
};

} // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fputs("usage: replay_trace_gen OUT [--corrupt | --truncated | --huge] [--scale N]\n", stderr);
        return 2;
    }
    const std::string out = argv[1];
    bool corrupt = false, truncated = false, huge = false, sparse = false;
    int scale = 1;
    for (int i = 2; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--corrupt") corrupt = true;
        else if (a == "--truncated") truncated = true;
        else if (a == "--huge") huge = true;
        else if (a == "--sparse") sparse = true;
        else if (a == "--scale" && i + 1 < argc) scale = std::atoi(argv[++i]);
        else return 2;
    }
    if (scale < 1) scale = 1;

    tr::builder b("/bin/replay-synthetic", {"replay-synthetic"});
    fake_malloc m;
    std::uint64_t now = 1000;
    auto tick = [&] { return now += 37; };
    auto alloc = [&](std::uint64_t n, tr::op o = tr::op::malloc_, std::uint32_t thread = 0) {
        const auto a = m.get(n);
        b.add(o, tick(), a, n, 0x401000 + std::uint64_t(o) * 16, thread);
        return a;
    };
    auto release = [&](std::uint64_t a, tr::op o = tr::op::free_, std::uint32_t thread = 0) {
        m.put(a);
        b.add(o, tick(), a, 0, 0x402000, thread);
    };

    const std::uint64_t buffer = sparse ? alloc(std::uint64_t(1) << 30) : 0;
    std::mt19937_64 rng(42);
    // 1. Trees: each child allocated right after its parent (depth-first).
    std::vector<std::uint64_t> tree;
    auto build = [&](auto& self, int depth) -> void {
        tree.push_back(alloc(48, tr::op::new_));
        if (depth == 0) return;
        self(self, depth - 1);
        self(self, depth - 1);
    };
    for (int t = 0; t < scale; ++t) build(build, 12);  // 8191 nodes each
    // 2. A list of records, some grown with realloc.
    std::vector<std::pair<std::uint64_t, std::uint64_t>> list;  // address, size
    for (int i = 0; i < 4000 * scale; ++i) list.emplace_back(alloc(24 + 8 * (i % 5)), 24 + 8 * (i % 5));
    for (int i = 0; i < 1000 * scale; ++i) {
        auto& [a, n] = list[std::size_t(i) * 3 % list.size()];
        const std::uint64_t nn = n * 2 + 16;
        const auto na = m.get(nn);
        m.put(a);
        b.add(tr::op::realloc_, tick(), na, nn, 0x403000, 0, a);
        a = na;
        n = nn;
    }
    // 3. Random churn, 16..512 bytes.
    std::vector<std::uint64_t> churn;
    std::uniform_int_distribution<std::uint64_t> size(16, 512);
    for (int i = 0; i < 30000 * scale; ++i) {
        if (!churn.empty() && rng() % 2) {
            const std::size_t k = rng() % churn.size();
            release(churn[k]);
            churn[k] = churn.back();
            churn.pop_back();
        } else {
            churn.push_back(alloc(size(rng), rng() % 3 ? tr::op::malloc_ : tr::op::new_array));
        }
    }
    // 4. Large and over-aligned blocks, calloc.
    std::vector<std::uint64_t> big;
    for (int i = 0; i < 8; ++i) big.push_back(alloc((64u << 10) << (i % 4), tr::op::calloc_));
    const auto a64 = m.get(200, 64);
    b.add(tr::op::memalign_, tick(), a64, 200, 0x404000, 0, 0, 6);
    const auto a8k = m.get(8192, 8192);
    b.add(tr::op::aligned_alloc_, tick(), a8k, 8192, 0x404000, 0, 0, 13);
    // 5. Anomalies: unknown free, free(NULL), a failed allocation, a second thread.
    b.add(tr::op::free_, tick(), 0x7777'0000ull, 0, 0x405000);
    b.add(tr::op::free_, tick(), 0, 0, 0x405000);
    b.add(tr::op::malloc_, tick(), 0, std::uint64_t(1) << 50, 0x405000, 0, 0, 0, true);
    for (int i = 0; i < 200; ++i) {
        const auto a = alloc(64, tr::op::malloc_, 1);
        if (i % 2) release(a, tr::op::free_, 1);
    }
    // Size 0: malloc(0), and realloc(p, 0) returning a block (as jemalloc's does).
    const auto z = alloc(0);
    const auto z2 = m.get(0);
    m.put(z);
    b.add(tr::op::realloc_, tick(), z2, 0, 0x406000, 0, z);
    const auto z3 = m.get(40);
    m.put(z2);
    b.add(tr::op::realloc_, tick(), z3, 40, 0x406000, 0, z2);
    release(z3);
    release(alloc(0, tr::op::new_array), tr::op::delete_array);
    // 6. Tear-down: half the trees, every list record, the big blocks; the
    // churn survivors and the rest of the trees stay live at exit.
    for (std::size_t i = 0; i < tree.size() / 2; ++i) release(tree[i], tr::op::delete_);
    for (auto& [a, n] : list) release(a);
    for (auto a : big) release(a);
    release(a64);
    release(a8k);
    if (sparse) release(buffer);

    if (huge) b.add(tr::op::malloc_, tick(), 0x7f0000000000, std::uint64_t(1) << 45, 0x407000);
    std::vector<std::byte> bytes = truncated ? b.unfinished() : b.finish();
    if (truncated) bytes.resize(bytes.size() - 7);  // cut inside the last record
    if (corrupt) bytes[bytes.size() / 2] ^= std::byte{0x5a};
    std::FILE* f = std::fopen(out.c_str(), "wb");
    if (!f || std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size() || std::fclose(f) != 0) {
        std::fprintf(stderr, "replay_trace_gen: cannot write %s\n", out.c_str());
        return 1;
    }
    return 0;
}
