// Standard containers on a locality heap: std::list, std::map and a list per
// customer, on Velox, with no change to the containers.
//
// Velox files free chunks by 64 KiB vicinity, then by size, and serves a
// request from the hint's vicinity. The hint comes, strongest first, from
// allocate(n, hint), an enclosing `al::near(p)` scope, then the allocator's
// policy: near_previous (the heap's last allocation) for Velox. Where it pays
// is an aged heap, whose free chunks are scattered: this program ages one,
// builds the containers on it and counts how many links stay within one
// vicinity. It checks Velox's figures (exit 1 below 90%) and prints
// std::allocator's on the same pattern for comparison (that figure is
// whatever this build's malloc does; under ASan it is ASan's allocator).
#include <allotheque/allotheque.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <iterator>
#include <cstdint>
#include <cstdio>
#include <list>
#include <map>
#include <memory>
#include <random>
#include <vector>

namespace al = allotheque;

struct order {
    std::uint64_t id;
    double amount;
};

constexpr unsigned vicinity_log2 = 16;   // al::velox_heap<>'s default
bool same_vicinity(const void* a, const void* b) {
    return (reinterpret_cast<std::uintptr_t>(a) >> vicinity_log2) == (reinterpret_cast<std::uintptr_t>(b) >> vicinity_log2);
}

// Frees three quarters of `xs` in random order.
template <class T>
void thin_out(std::vector<T>& xs, std::mt19937_64& rng, auto&& free) {
    std::shuffle(xs.begin(), xs.end(), rng);
    for (std::size_t keep = xs.size() / 4; xs.size() > keep; xs.pop_back()) free(xs.back());
}

struct figures {
    double list_links, map_links, customer_orders;
};

// The same program for any allocator type: only the allocator differs.
template <class Alloc>
figures run(Alloc a) {
    struct customer {
        std::uint64_t id;
        std::list<order, Alloc> orders;
    };
    using customer_alloc = typename std::allocator_traits<Alloc>::template rebind_alloc<customer>;
    using traits = std::allocator_traits<customer_alloc>;
    customer_alloc ca(a);
    std::mt19937_64 rng(42);
    // Age the heap: order-list nodes and customer-sized chunks allocated in
    // turn, then three quarters of each freed in random order, so free chunks
    // of both sizes lie in every vicinity touched.
    std::list<order, Alloc> junk_orders{a};
    std::vector<typename std::list<order, Alloc>::iterator> order_nodes;
    std::vector<customer*> junk_customers;
    for (int i = 0; i < 100'000; ++i) {
        order_nodes.push_back(junk_orders.insert(junk_orders.end(), order{}));
        junk_customers.push_back(traits::allocate(ca, 1));
    }
    thin_out(order_nodes, rng, [&](auto it) { junk_orders.erase(it); });
    thin_out(junk_customers, rng, [&](customer* c) { traits::deallocate(ca, c, 1); });
    figures f{};

    // 1. Customers created at scattered places (an explicit hint: a survivor
    //    of the ageing), then orders for random customers, each placed next
    //    to its customer's record with a near() scope, which std::list cannot
    //    pass on itself.
    std::vector<customer*> customers;
    for (std::uint64_t c = 0; c < 40; ++c) {
        customer* p = traits::allocate(ca, 1, junk_customers[c * (junk_customers.size() / 40)]);
        traits::construct(ca, p, customer{c, std::list<order, Alloc>{a}});
        customers.push_back(p);
    }
    std::uniform_int_distribution<std::size_t> pick(0, customers.size() - 1);
    for (std::uint64_t i = 0; i < 2'000; ++i) {
        customer* c = customers[pick(rng)];
        auto hint = al::near(c);
        c->orders.push_back({i, 3.0});
    }
    std::size_t near = 0, links = 0;
    for (customer* c : customers)
        for (const order& o : c->orders) near += same_vicinity(c, &o), ++links;
    f.customer_orders = static_cast<double>(near) / static_cast<double>(links);

    // 2. A list built on the aged heap: each node near the previous one (the
    //    policy; no code in the container).
    std::list<order, Alloc> xs{a};
    for (std::uint64_t i = 0; i < 20'000; ++i) xs.push_back({i, 1.0});
    near = links = 0;
    for (auto it = xs.begin(), prev = it++; it != xs.end(); prev = it++, ++links) near += same_vicinity(&*prev, &*it);
    f.list_links = static_cast<double>(near) / static_cast<double>(links);

    // 3. A map filled in key order: in-order neighbours were allocated one
    //    after the other, so they share a vicinity too.
    using map_alloc = typename std::allocator_traits<Alloc>::template rebind_alloc<std::pair<const std::uint64_t, order>>;
    std::map<std::uint64_t, order, std::less<>, map_alloc> m{map_alloc(a)};
    for (std::uint64_t k = 0; k < 20'000; ++k) m.emplace(k, order{k, 2.0});
    near = links = 0;
    for (auto it = m.begin(), prev = it++; it != m.end(); prev = it++, ++links) near += same_vicinity(&*prev, &*it);
    f.map_links = static_cast<double>(near) / static_cast<double>(links);

    for (customer* c : customers) {
        traits::destroy(ca, c);
        traits::deallocate(ca, c, 1);
    }
    for (customer* c : junk_customers) traits::deallocate(ca, c, 1);
    return f;
}

int main() {
    using heap_type = al::velox_heap<>;
    heap_type heap;
    const figures v = run(al::allocator<order, heap_type>(heap));
    const figures s = run(std::allocator<order>());

    std::printf("links within one 64 KiB vicinity, on an aged heap   Velox   std::allocator\n");
    std::printf("  order next to its customer (al::near scope)       %5.1f%%  %5.1f%%\n", 100 * v.customer_orders,
                100 * s.customer_orders);
    std::printf("  std::list, consecutive nodes                      %5.1f%%  %5.1f%%\n", 100 * v.list_links, 100 * s.list_links);
    std::printf("  std::map, in-order neighbours                     %5.1f%%  %5.1f%%\n", 100 * v.map_links, 100 * s.map_links);
    const bool ok = v.list_links >= 0.9 && v.map_links >= 0.9 && v.customer_orders >= 0.9;
    std::puts(ok ? "ok: Velox keeps at least 90% of each kind of link within a vicinity" : "FAIL: below 90%");
    return ok ? 0 : 1;
}
