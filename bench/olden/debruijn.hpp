// debruijn: a packet-switched network simulation on a binary de Bruijn graph
// (the STL workload of the allotheque paper). Written with standard
// containers over bench::stl_allocator, so every container node comes from
// the policy, hinted with the previous allocation.
//
// The network has 2^k nodes; node v links to (2v) mod 2^k and (2v+1) mod 2^k,
// so a packet reaches any destination in at most k hops by shifting in the
// destination's bits (after the longest overlap between the current node's
// suffix and the destination's prefix). Every step:
//   * failed nodes whose repair time has come back up (std::deque of repair
//     events in time order, std::map of down nodes);
//   * a few random nodes fail: packets queued there are lost;
//   * new packets are injected at random up nodes for random destinations;
//   * every up node forwards up to `capacity` packets from the head of its
//     queue (std::list): a packet at its destination is delivered; one whose
//     next hop is down takes the other link out of the node (a detour) or is
//     dropped when both are down or the destination itself is down; a packet
//     older than its time-to-live is dropped. A forwarded packet is copied
//     into the next node's arrival list (one allocation, one free per hop)
//     and arrivals join the queues at the end of the step.
// After the injection phase the network drains until no packet is in flight.
//
// Check: packets are conserved at every audit (injected = delivered + dropped
// + in flight), the network drains, and some packets are delivered.
#pragma once
#include <cstdint>
#include <deque>
#include <functional>
#include <list>
#include <map>
#include <stdexcept>
#include <utility>
#include <vector>

#include "common/policy.hpp"
#include "common/stl_adapter.hpp"
#include "olden/rng.hpp"
#include "olden/scale.hpp"

namespace bench::olden {

namespace debruijn_detail {

struct packet {
    std::uint32_t dst;
    std::uint16_t hops;
    std::uint16_t detours;
};

struct params {
    int k;                    // 2^k nodes
    std::uint64_t inject;     // packets to inject in total
    std::uint32_t rate;       // injections per step
    std::uint32_t capacity;   // packets a node forwards per step
    std::uint32_t failures;   // node failures per step
    std::uint32_t repair;     // steps a failed node stays down
};

inline params debruijn_params(scale s) {
    switch (s) {
    case scale::quick: return {13, 100000, 2400, 7, 3, 20};
    case scale::standard: return {14, 220000, 6000, 7, 6, 20};
    case scale::full: return {16, 1420000, 24000, 7, 24, 20}; // ~22.5 M objects, ~0.5 M live
    }
    return {13, 100000, 2400, 7, 3, 20};
}

// Next hop from v towards dst on the 2^k de Bruijn graph (v != dst).
inline std::uint32_t next_hop(std::uint32_t v, std::uint32_t dst, int k) {
    const std::uint32_t mask = (std::uint32_t{1} << k) - 1;
    int j = k - 1; // longest overlap: v's low j bits == dst's high j bits
    for (; j > 0; --j)
        if ((v & ((std::uint32_t{1} << j) - 1)) == (dst >> (k - j))) break;
    const std::uint32_t bit = (dst >> (k - j - 1)) & 1;
    return ((v << 1) | bit) & mask;
}

} // namespace debruijn_detail

template <bench::policy P>
std::uint64_t run_debruijn(P& alloc, scale s) {
    using namespace debruijn_detail;
    const params pr = debruijn_params(s);
    const std::uint32_t n = std::uint32_t{1} << pr.k;
    const std::uint16_t ttl = static_cast<std::uint16_t>(3 * pr.k);

    bench::stl_context<P> ctx(alloc);
    using packet_list = std::list<packet, bench::stl_allocator<packet, P>>;
    struct node {
        packet_list queue;
        packet_list arrivals;
        explicit node(const bench::stl_allocator<packet, P>& a) : queue(a), arrivals(a) {}
    };

    std::uint64_t injected = 0, refused = 0, delivered = 0, dropped = 0, lost_in_failures = 0;
    std::uint64_t hop_sum = 0, detour_sum = 0, failures = 0;
    std::uint32_t step = 0;
    bool conserved = true;
    {
        std::vector<node, bench::stl_allocator<node, P>> nodes{bench::stl_allocator<node, P>(ctx)};
        nodes.reserve(n);
        for (std::uint32_t v = 0; v < n; ++v) nodes.emplace_back(bench::stl_allocator<packet, P>(ctx));
        std::map<std::uint32_t, std::uint32_t, std::less<std::uint32_t>,
                 bench::stl_allocator<std::pair<const std::uint32_t, std::uint32_t>, P>>
            down{bench::stl_allocator<std::pair<const std::uint32_t, std::uint32_t>, P>(ctx)}; // node -> failed at
        std::deque<std::pair<std::uint32_t, std::uint32_t>,
                   bench::stl_allocator<std::pair<std::uint32_t, std::uint32_t>, P>>
            repairs{bench::stl_allocator<std::pair<std::uint32_t, std::uint32_t>, P>(ctx)}; // (time, node)
        rng g(0x646562727569ULL);

        auto in_flight = [&] {
            std::uint64_t f = 0;
            for (const node& x : nodes) f += x.queue.size() + x.arrivals.size();
            return f;
        };

        const std::uint32_t max_steps = static_cast<std::uint32_t>(pr.inject / pr.rate) + 100000;
        std::uint64_t flying = 0; // maintained incrementally, audited against in_flight()
        for (step = 0; injected + refused < pr.inject || flying > 0; ++step) {
            if (step >= max_steps) throw std::runtime_error("debruijn: network does not drain");
            // Repairs, then failures.
            while (!repairs.empty() && repairs.front().first <= step) {
                down.erase(repairs.front().second);
                repairs.pop_front();
            }
            if (injected + refused < pr.inject) {
                for (std::uint32_t i = 0; i < pr.failures; ++i) {
                    const auto v = static_cast<std::uint32_t>(g.below(n));
                    if (!down.emplace(v, step).second) continue;
                    repairs.emplace_back(step + pr.repair, v);
                    ++failures;
                    const std::uint64_t lost = nodes[v].queue.size() + nodes[v].arrivals.size();
                    lost_in_failures += lost;
                    dropped += lost;
                    flying -= lost;
                    nodes[v].queue.clear();
                    nodes[v].arrivals.clear();
                }
            }
            // Injection.
            for (std::uint32_t i = 0; i < pr.rate && injected + refused < pr.inject; ++i) {
                const auto src = static_cast<std::uint32_t>(g.below(n));
                const auto dst = static_cast<std::uint32_t>(g.below(n));
                if (down.find(src) != down.end()) {
                    ++refused;
                    continue;
                }
                nodes[src].queue.push_back(packet{dst, 0, 0});
                ++injected;
                ++flying;
            }
            // Forwarding.
            for (std::uint32_t v = 0; v < n; ++v) {
                packet_list& q = nodes[v].queue;
                for (std::uint32_t c = 0; c < pr.capacity && !q.empty(); ++c) {
                    packet p = q.front();
                    q.pop_front();
                    if (p.dst == v) {
                        ++delivered;
                        --flying;
                        hop_sum += p.hops;
                        detour_sum += p.detours;
                        continue;
                    }
                    if (p.hops >= ttl) {
                        ++dropped;
                        --flying;
                        continue;
                    }
                    std::uint32_t to = next_hop(v, p.dst, pr.k);
                    if (down.find(to) != down.end()) {
                        const std::uint32_t alt = to ^ 1;
                        if (to == p.dst || down.find(alt) != down.end()) {
                            ++dropped;
                            --flying;
                            continue;
                        }
                        to = alt;
                        ++p.detours;
                    }
                    ++p.hops;
                    nodes[to].arrivals.push_back(p);
                }
            }
            for (node& x : nodes) x.queue.splice(x.queue.end(), x.arrivals);
            if (step % 16 == 0) {
                const std::uint64_t f = in_flight();
                conserved = conserved && f == flying && injected == delivered + dropped + f;
            }
        }
        conserved = conserved && in_flight() == 0 && injected == delivered + dropped;
    }

    if (!conserved) throw std::runtime_error("debruijn: packets not conserved (delivered + dropped + in flight != injected)");
    if (delivered == 0 || delivered < injected / 2) throw std::runtime_error("debruijn: too few packets delivered");
    if (hop_sum > delivered * ttl) throw std::runtime_error("debruijn: delivered packet exceeded its time to live");

    std::uint64_t h = combine(0x6465627275696a6eULL, injected);
    h = combine(h, refused);
    h = combine(h, delivered);
    h = combine(h, dropped);
    h = combine(h, lost_in_failures);
    h = combine(h, hop_sum);
    h = combine(h, detour_sum);
    h = combine(h, failures);
    h = combine(h, step);
    return h;
}

} // namespace bench::olden
