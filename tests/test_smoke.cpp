// Build smoke test: the toolchain, C++20, Boost.Intrusive and the allotheque
// include path work together under the flags of the current preset
// (sanitizers, -Werror). Library behaviour is tested elsewhere.
#include "catch.hpp"

#include <allotheque/version.hpp>

#if __has_include(<allotheque/allotheque.hpp>)
#include <allotheque/allotheque.hpp>
#define ALLOTHEQUE_SMOKE_HAVE_UMBRELLA 1
#else
#define ALLOTHEQUE_SMOKE_HAVE_UMBRELLA 0
#endif

#include <boost/intrusive/slist.hpp>
#include <boost/version.hpp>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

static_assert(__cplusplus >= 202002L, "allotheque needs C++20");
static_assert(BOOST_VERSION >= 107400, "allotheque needs Boost >= 1.74");

namespace {

namespace bi = boost::intrusive;

// A free chunk as an allocator would see it: the link lives inside the chunk.
struct free_chunk : bi::slist_base_hook<bi::link_mode<bi::normal_link>> {};
using free_list = bi::slist<free_chunk, bi::constant_time_size<false>, bi::cache_last<false>>;

constexpr std::size_t chunk_size = 32;
constexpr std::size_t chunk_count = 64;
static_assert(sizeof(free_chunk) <= chunk_size);

struct arena {
  alignas(std::max_align_t) std::byte bytes[chunk_size * chunk_count];

  [[nodiscard]] bool owns(const void* p) const {
    auto a = reinterpret_cast<std::uintptr_t>(p);
    auto lo = reinterpret_cast<std::uintptr_t>(bytes);
    return a >= lo && a < lo + sizeof bytes && (a - lo) % chunk_size == 0;
  }
};

// Carve the arena into chunks and thread them onto an intrusive free list.
void carve(arena& a, free_list& list) {
  for (std::size_t i = chunk_count; i-- > 0;) {
    auto* c = ::new (static_cast<void*>(a.bytes + i * chunk_size)) free_chunk;
    list.push_front(*c);
  }
}

// Pop every chunk, destroying it as it leaves the list; returns their addresses.
std::vector<const void*> drain(free_list& list) {
  std::vector<const void*> out;
  while (!list.empty()) {
    free_chunk& c = list.front();
    list.pop_front();
    out.push_back(&c);
    c.~free_chunk();
  }
  return out;
}

}  // namespace

TEST_CASE("version header matches the CMake project version", "[smoke]") {
  const std::string expected = ALLOTHEQUE_PROJECT_VERSION;
  CHECK(allotheque::version_string == expected);
  CHECK(expected == std::to_string(ALLOTHEQUE_VERSION_MAJOR) + "." +
                        std::to_string(ALLOTHEQUE_VERSION_MINOR) + "." +
                        std::to_string(ALLOTHEQUE_VERSION_PATCH));
}

TEST_CASE("umbrella header", "[smoke]") {
  // Reports whether <allotheque/allotheque.hpp> exists yet; when it does, this
  // translation unit proves it compiles with the preset's flags.
  INFO("allotheque.hpp present: " << ALLOTHEQUE_SMOKE_HAVE_UMBRELLA);
  SUCCEED();
}

TEST_CASE("Boost.Intrusive slist threads chunks of raw storage", "[smoke]") {
  auto a = std::make_unique<arena>();
  free_list list;
  carve(*a, list);

  std::size_t n = 0;
  for (const free_chunk& c : list) {
    REQUIRE(a->owns(&c));
    ++n;
  }
  REQUIRE(n == chunk_count);

  // Free-list discipline: LIFO, first chunk carved at the lowest address.
  CHECK(static_cast<const void*>(&list.front()) == static_cast<const void*>(a->bytes));

  // Take one from the middle and give it back at the front.
  auto it = list.begin();
  std::advance(it, 10);
  auto prev = list.begin();
  std::advance(prev, 9);
  free_chunk& taken = *it;
  list.erase_after(prev);
  CHECK(std::distance(list.begin(), list.end()) == static_cast<std::ptrdiff_t>(chunk_count - 1));
  list.push_front(taken);
  CHECK(&list.front() == &taken);

  auto addrs = drain(list);
  REQUIRE(addrs.size() == chunk_count);
  std::sort(addrs.begin(), addrs.end());
  CHECK(std::adjacent_find(addrs.begin(), addrs.end()) == addrs.end());
  CHECK(list.empty());
}

TEST_CASE("independent free lists on several threads", "[smoke][threads]") {
  // Exercises the `threads` label / ThreadSanitizer preset: each thread owns
  // its arena and list; results are published through an atomic counter.
  constexpr int thread_count = 4;
  std::atomic<std::size_t> total{0};
  std::vector<std::unique_ptr<arena>> arenas;
  for (int i = 0; i < thread_count; ++i) arenas.push_back(std::make_unique<arena>());

  std::vector<std::thread> threads;
  for (int t = 0; t < thread_count; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 100; ++round) {
        free_list list;
        carve(*arenas[t], list);
        total.fetch_add(drain(list).size(), std::memory_order_relaxed);
      }
    });
  }
  for (auto& th : threads) th.join();
  CHECK(total.load() == std::size_t{thread_count} * 100 * chunk_count);
}
