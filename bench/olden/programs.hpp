// The program table of the Olden driver: one entry per benchmark program.
//
// To add a program `foo`: write bench/olden/foo.hpp with
//   template <bench::policy P> std::uint64_t run_foo(P&, bench::olden::scale);
// and add one guarded include below and one guarded line to `program_table`.
// A header that does not exist yet is simply left out (__has_include), so the
// driver builds with whichever programs are present.
#pragma once
#include <cstdint>
#include <span>
#include <string_view>

#include "common/policy.hpp"
#include "olden/scale.hpp"

#if __has_include("olden/bh.hpp")
#include "olden/bh.hpp"
#endif
#if __has_include("olden/bisort.hpp")
#include "olden/bisort.hpp"
#endif
#if __has_include("olden/em3d.hpp")
#include "olden/em3d.hpp"
#endif
#if __has_include("olden/health.hpp")
#include "olden/health.hpp"
#endif
#if __has_include("olden/mst.hpp")
#include "olden/mst.hpp"
#endif
#if __has_include("olden/perimeter.hpp")
#include "olden/perimeter.hpp"
#endif
#if __has_include("olden/power.hpp")
#include "olden/power.hpp"
#endif
#if __has_include("olden/treeadd.hpp")
#include "olden/treeadd.hpp"
#endif
#if __has_include("olden/tsp.hpp")
#include "olden/tsp.hpp"
#endif
#if __has_include("olden/voronoi.hpp")
#include "olden/voronoi.hpp"
#endif
#if __has_include("olden/debruijn.hpp")
#include "olden/debruijn.hpp"
#endif
#if __has_include("olden/md.hpp")
#include "olden/md.hpp"
#endif

namespace bench::olden {

template <class P>
struct program_entry {
    std::string_view name;
    std::uint64_t (*run)(P&, scale);
};

#define ALLOTHEQUE_OLDEN_ENTRY(name) program_entry<P>{#name, [](P& p, scale s) { return run_##name(p, s); }},

template <bench::policy P>
inline constexpr program_entry<P> program_table[] = {
#if __has_include("olden/bh.hpp")
    ALLOTHEQUE_OLDEN_ENTRY(bh)
#endif
#if __has_include("olden/bisort.hpp")
    ALLOTHEQUE_OLDEN_ENTRY(bisort)
#endif
#if __has_include("olden/em3d.hpp")
    ALLOTHEQUE_OLDEN_ENTRY(em3d)
#endif
#if __has_include("olden/health.hpp")
    ALLOTHEQUE_OLDEN_ENTRY(health)
#endif
#if __has_include("olden/mst.hpp")
    ALLOTHEQUE_OLDEN_ENTRY(mst)
#endif
#if __has_include("olden/perimeter.hpp")
    ALLOTHEQUE_OLDEN_ENTRY(perimeter)
#endif
#if __has_include("olden/power.hpp")
    ALLOTHEQUE_OLDEN_ENTRY(power)
#endif
#if __has_include("olden/treeadd.hpp")
    ALLOTHEQUE_OLDEN_ENTRY(treeadd)
#endif
#if __has_include("olden/tsp.hpp")
    ALLOTHEQUE_OLDEN_ENTRY(tsp)
#endif
#if __has_include("olden/voronoi.hpp")
    ALLOTHEQUE_OLDEN_ENTRY(voronoi)
#endif
#if __has_include("olden/debruijn.hpp")
    ALLOTHEQUE_OLDEN_ENTRY(debruijn)
#endif
#if __has_include("olden/md.hpp")
    ALLOTHEQUE_OLDEN_ENTRY(md)
#endif
};

#undef ALLOTHEQUE_OLDEN_ENTRY

template <bench::policy P>
constexpr std::span<const program_entry<P>> programs() noexcept {
    return program_table<P>;
}

} // namespace bench::olden
