// Remote frees in batches (detail/remote_outbox.hpp, detail/remote_list.hpp),
// checked against a model: random frees for many owners, then every block
// must reach its own owner exactly once, in batches that respect the limits,
// with nothing left behind after a flush.
#include "catch.hpp"

#include <cstddef>
#include <cstdint>
#include <map>
#include <random>
#include <set>
#include <vector>

#include <allotheque/detail/batch_pool.hpp>
#include <allotheque/detail/remote_outbox.hpp>

namespace al = allotheque;
using al::detail::batch_pool;
using al::detail::remote_batch;
using al::detail::remote_list;
using al::detail::remote_outbox;
using al::detail::remote_record;

namespace {

// Each owner has a list; owner k's way is k modulo the ways (the registry
// numbers its slots so).
struct owner {
    remote_list<true> list;
};

struct harness {
    std::vector<owner> owners;
    batch_pool pool;
    std::size_t supplied = 0, posted = 0;
    std::vector<void*> alone;   // blocks sent on their own
    bool dry = false;           // the pool refuses
    explicit harness(std::size_t n) : owners(n) {}
    ~harness() { pool.release_all(); }

    // remote_outbox's outlet.
    struct outlet {
        harness* h;
        void post(void* o, remote_batch* b) const {
            ++h->posted;
            static_cast<owner*>(o)->list.push_batch(b);
        }
        remote_batch* supply() const {
            ++h->supplied;
            return h->dry ? nullptr : h->pool.take();
        }
        void alone(void*, void* p, std::size_t) const { h->alone.push_back(p); }
    };
    outlet out() { return {this}; }
};

} // namespace

TEST_CASE("remote_outbox: every block reaches its owner once, in bounded batches", "[remote]") {
    std::mt19937_64 rng(GENERATE(1u, 2u, 3u));
    const std::size_t n_owners = GENERATE(1u, 5u, 12u, 100u);
    harness h(n_owners);
    remote_outbox out;
    std::vector<std::vector<std::byte>> memory;   // the blocks, never moved
    std::map<void*, std::size_t> expected;        // block -> owner index

    for (int step = 0; step < 20000; ++step) {
        const std::size_t o = rng() % n_owners;
        // Mostly small, now and then up to max_block or past it.
        const std::size_t r = rng() % 100;
        const std::size_t bytes = r < 90   ? 16 + rng() % 512
                                  : r < 98 ? 512 + rng() % (remote_outbox::max_block - 512 + 1)
                                           : remote_outbox::max_block + 1 + rng() % 4096;
        memory.emplace_back(16);
        void* p = memory.back().data();
        const std::size_t alone_before = h.alone.size();
        out.add(&h.owners[o], o % remote_outbox::ways, p, bytes, h.out());
        if (bytes <= remote_outbox::max_block) {
            expected[p] = o;
            CHECK(h.alone.size() == alone_before);
        } else {
            REQUIRE(h.alone.size() == alone_before + 1);
            CHECK(h.alone.back() == p);
        }
        // Now and then the owners drain what reached them, recycling the batches.
        if (rng() % 500 == 0) {
            for (std::size_t k = 0; k < n_owners; ++k)
                h.owners[k].list.drain(
                    [&](remote_record* rec) {
                        auto it = expected.find(rec);
                        REQUIRE(it != expected.end());   // never twice, never foreign
                        CHECK(it->second == k);
                        expected.erase(it);
                    },
                    [&](remote_batch* b) {
                        CHECK(b->count >= 1);
                        CHECK(b->count <= remote_batch::capacity);
                        out.keep(b, [&](remote_batch* x) { h.pool.give(x); });
                    });
        }
    }
    const std::vector<void*>& alone = h.alone;
    CHECK(!alone.empty());
    out.flush(h.out());
    CHECK(out.empty());
    for (std::size_t k = 0; k < n_owners; ++k)
        h.owners[k].list.drain(
            [&](remote_record* rec) {
                auto it = expected.find(rec);
                REQUIRE(it != expected.end());
                CHECK(it->second == k);
                expected.erase(it);
            },
            [&](remote_batch* b) { out.keep(b, [&](remote_batch* x) { h.pool.give(x); }); });
    CHECK(expected.empty());
    std::size_t pushed = 0;
    for (auto& o : h.owners) pushed += o.list.pushed();
    CHECK(pushed == 20000 - alone.size());
    // Batches are reused: fewer came from the pool than were posted.
    CHECK(h.supplied < h.posted);
    // And they are full enough to be worth it while the owners fit the ways
    // (the periodic flushes cut some short); past that, owners sharing a way
    // post each other's batches early, but every block still arrives.
    if (n_owners <= remote_outbox::ways) CHECK(pushed / h.posted >= 8);
    UNSCOPED_INFO("owners " << n_owners << ": " << h.posted << " batches for " << pushed << " blocks, "
                            << h.supplied << " from the pool");
}

TEST_CASE("remote_outbox: a batch goes when full, and a way posts its batch before taking a new owner", "[remote]") {
    harness h(2);
    remote_outbox out;
    std::vector<std::byte> memory(16 * 200);
    auto block = [&](std::size_t i) { return static_cast<void*>(memory.data() + 16 * i); };

    // capacity small blocks: exactly one batch reaches the owner.
    for (std::uint32_t i = 0; i < remote_batch::capacity; ++i) out.add(&h.owners[0], 0, block(i), 16, h.out());
    CHECK(h.owners[0].list.pushed() == remote_batch::capacity);
    CHECK(out.empty());

    // Pending blocks wait for a flush.
    for (int i = 0; i < 4; ++i) out.add(&h.owners[1], 1, block(100 + std::size_t(i)), 16, h.out());
    CHECK(h.owners[1].list.pushed() == 0);
    CHECK(!out.empty());
    // Another owner in the same way: the first batch goes, the new one waits.
    out.add(&h.owners[0], 1, block(150), 16, h.out());
    CHECK(h.owners[1].list.pushed() == 4);
    CHECK(h.owners[0].list.pushed() == remote_batch::capacity);
    out.flush(h.out());
    CHECK(h.owners[0].list.pushed() == remote_batch::capacity + 1);
    CHECK(out.empty());

    // No batch to be had (the pool refuses): the block must go alone.
    remote_outbox dry;
    h.dry = true;
    dry.add(&h.owners[0], 0, block(160), 16, h.out());
    CHECK(dry.empty());
    REQUIRE(h.alone.size() == 1);
    CHECK(h.alone[0] == block(160));
    h.dry = false;
    CHECK(h.alone.empty() == false);
    // So do blocks past max_block, with a batch at hand.
    dry.add(&h.owners[0], 0, block(161), remote_outbox::max_block + 1, h.out());
    CHECK(h.alone.size() == 2);
    CHECK(dry.empty());

    // Spares beyond kept_spares overflow.
    std::size_t overflowed = 0;
    for (std::uint32_t i = 0; i < remote_outbox::kept_spares + 3; ++i)
        dry.keep(h.pool.take(), [&](remote_batch* b) {
            ++overflowed;
            h.pool.give(b);
        });
    CHECK(overflowed == 3);
    std::size_t given = 0;
    dry.give_spares([&](remote_batch* b) {
        ++given;
        h.pool.give(b);
    });
    CHECK(given == remote_outbox::kept_spares);
    // Drain both owners so that nothing refers to the pool's batches any more.
    for (auto& o : h.owners) o.list.drain([](remote_record*) {}, [](remote_batch*) {});
}

TEST_CASE("remote_list: single blocks and batches drain together, every block once", "[remote]") {
    remote_list<true> l;
    batch_pool pool;
    std::vector<remote_record> singles(10);
    std::vector<std::byte> memory(16 * 100);
    std::set<void*> expected;
    for (auto& r : singles) {
        l.push_link(&r);
        expected.insert(&r);
    }
    for (int b = 0; b < 3; ++b) {
        remote_batch* batch = pool.take();
        REQUIRE(batch);
        // The outbox finds a batch's end by its alignment.
        CHECK(reinterpret_cast<std::uintptr_t>(batch) % alignof(remote_batch) == 0);
        batch->count = 20;
        for (std::uint32_t i = 0; i < batch->count; ++i) {
            void* p = memory.data() + 16 * (std::size_t(b) * 20 + i);
            batch->block[i] = p;
            expected.insert(p);
        }
        l.push_batch(batch);
    }
    CHECK(l.pushed() == 70);
    std::size_t batches = 0;
    const std::size_t n = l.drain([&](remote_record* r) { CHECK(expected.erase(r) == 1); },
                                  [&](remote_batch* b) {
                                      ++batches;
                                      pool.give(b);
                                  });
    CHECK(n == 70);
    CHECK(batches == 3);
    CHECK(expected.empty());
    CHECK(!l.maybe_nonempty());
    pool.release_all();
}
