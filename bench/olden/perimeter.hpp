// Olden perimeter: builds the region quadtree of a 2^depth x 2^depth binary
// image and computes the perimeter of the black region with Samet's
// neighbour-finding algorithm: for every black leaf and each of its four
// sides, find the adjacent node of equal or greater size by climbing to a
// common ancestor through parent pointers and descending along the mirrored
// path; a white (or absent) neighbour contributes the whole side, a grey one
// the total length of its white leaves along the shared side.
//
// The image: concentric rings centred in the picture, ring width N/256
// (alternating white/black from the centre), black up to radius 120 * N/256.
// A pixel's colour is a function of the squared distance of its centre, so a
// square is uniform exactly when its nearest and farthest pixel centres fall
// in the same ring; such squares become leaves.
//
// Check: the perimeter is recomputed by scanning the image function pixel by
// pixel (colour changes along every row and column, plus black pixels on the
// border).
//
// Allocation: every quadtree node, children with their parent as the hint
// (the root has none); freed post-order.
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <new>
#include <stdexcept>
#include <string>

#include "objects.hpp"
#include "../common/policy.hpp"
#include "rng.hpp"
#include "scale.hpp"

namespace bench::olden {

namespace perimeter_impl {

enum class color : int { white, black, grey };
enum quadrant : int { nw = 0, ne = 1, sw = 2, se = 3 };
enum direction : int { north, east, south, west };

struct quad_node {
    color col;
    int childtype;   // which quadrant of its parent this node is
    quad_node* parent;
    quad_node* child[4];
};

using olden::alloc_obj;
using olden::free_obj;

inline constexpr int max_depth = 13;   // bound of the checker's row buffers
inline constexpr std::uint64_t rings = 120;

// The image. Pixel (x, y), 0 <= x, y < n, has its centre at
// (2x + 1 - n, 2y + 1 - n) in half-pixel units.
struct image {
    std::int64_t n;
    std::uint64_t band2;   // ring width in half-pixel units

    static std::uint64_t isqrt(std::uint64_t v) {
        auto r = static_cast<std::uint64_t>(std::sqrt(static_cast<double>(v)));
        while (r * r > v) --r;
        while ((r + 1) * (r + 1) <= v) ++r;
        return r;
    }
    // Ring index of a squared distance (half-pixel units), saturated at `rings`.
    std::uint64_t ring(std::uint64_t d2) const {
        const std::uint64_t k = isqrt(d2) / band2;
        return k < rings ? k : rings;
    }
    static bool black_ring(std::uint64_t k) { return k < rings && (k & 1U) != 0; }
    std::int64_t coord(std::int64_t x) const { return 2 * x + 1 - n; }
    bool black(std::int64_t x, std::int64_t y) const {
        const auto cx = static_cast<std::uint64_t>(coord(x) < 0 ? -coord(x) : coord(x));
        const auto cy = static_cast<std::uint64_t>(coord(y) < 0 ? -coord(y) : coord(y));
        return black_ring(ring(cx * cx + cy * cy));
    }
    // Smallest and largest |centre coordinate| over pixels [x0, x0 + size).
    void extent(std::int64_t x0, std::int64_t size, std::uint64_t& lo, std::uint64_t& hi) const {
        const std::int64_t a = coord(x0), b = coord(x0 + size - 1);
        const std::uint64_t aa = static_cast<std::uint64_t>(a < 0 ? -a : a);
        const std::uint64_t bb = static_cast<std::uint64_t>(b < 0 ? -b : b);
        hi = aa > bb ? aa : bb;
        lo = (a < 0 && b > 0) ? 1 : (aa < bb ? aa : bb);
    }
    // white, black, or grey (mixed) for the square at (x0, y0) of side `size`.
    color classify(std::int64_t x0, std::int64_t y0, std::int64_t size) const {
        std::uint64_t xlo, xhi, ylo, yhi;
        extent(x0, size, xlo, xhi);
        extent(y0, size, ylo, yhi);
        const std::uint64_t k_near = ring(xlo * xlo + ylo * ylo);
        const std::uint64_t k_far = ring(xhi * xhi + yhi * yhi);
        if (k_near != k_far) return color::grey;
        return black_ring(k_near) ? color::black : color::white;
    }
};

template <bench::policy P>
quad_node* make_tree(P& a, const image& img, std::int64_t x0, std::int64_t y0, std::int64_t size,
                     quad_node* parent, int childtype) {
    quad_node* q = alloc_obj<quad_node>(a, parent);
    q->parent = parent;
    q->childtype = childtype;
    q->col = img.classify(x0, y0, size);
    if (q->col == color::grey) {
        const std::int64_t h = size / 2;
        q->child[nw] = make_tree(a, img, x0, y0, h, q, nw);
        q->child[ne] = make_tree(a, img, x0 + h, y0, h, q, ne);
        q->child[sw] = make_tree(a, img, x0, y0 + h, h, q, sw);
        q->child[se] = make_tree(a, img, x0 + h, y0 + h, h, q, se);
    }
    return q;
}

template <bench::policy P>
void release(P& a, quad_node* q) {
    if (q == nullptr) return;
    for (quad_node* c : q->child) release(a, c);
    free_obj(a, q);
}

// Is quadrant q on side d of its parent?
inline bool adj(int d, int q) {
    switch (d) {
    case north: return q == nw || q == ne;
    case south: return q == sw || q == se;
    case east: return q == ne || q == se;
    case west: return q == nw || q == sw;
    }
    return false;
}

// The quadrant mirroring q across side d.
inline int reflect(int d, int q) {
    if (d == north || d == south) return q ^ 2;   // nw<->sw, ne<->se
    return q ^ 1;                                 // nw<->ne, sw<->se
}

// Neighbour of p on side d of equal or greater size, nullptr at the border.
inline quad_node* gtequal_adj_neighbor(quad_node* p, int d) {
    quad_node* q = p->parent;
    if (q != nullptr && adj(d, p->childtype)) q = gtequal_adj_neighbor(q, d);
    if (q != nullptr && q->col == color::grey) return q->child[reflect(d, p->childtype)];
    return q;
}

// Total length of the white leaves of p in quadrants q1/q2 (along one side).
inline std::uint64_t sum_adjacent(const quad_node* p, int q1, int q2, std::uint64_t size) {
    if (p->col == color::grey)
        return sum_adjacent(p->child[q1], q1, q2, size / 2) + sum_adjacent(p->child[q2], q1, q2, size / 2);
    return p->col == color::white ? size : 0;
}

struct counts {
    std::uint64_t nodes = 0, black = 0, white = 0;
};

inline std::uint64_t perimeter(quad_node* p, std::uint64_t size, counts& c) {
    ++c.nodes;
    if (p->col == color::grey) {
        std::uint64_t total = 0;
        for (quad_node* ch : p->child) total += perimeter(ch, size / 2, c);
        return total;
    }
    if (p->col == color::white) {
        ++c.white;
        return 0;
    }
    ++c.black;
    std::uint64_t total = 0;
    for (int d = north; d <= west; ++d) {
        const quad_node* q = gtequal_adj_neighbor(p, d);
        if (q == nullptr || q->col == color::white) {
            total += size;
        } else if (q->col == color::grey) {
            // the quadrants of q on the side facing p
            int q1 = 0, q2 = 0;
            switch (d) {
            case north: q1 = sw; q2 = se; break;
            case south: q1 = nw; q2 = ne; break;
            case east: q1 = nw; q2 = sw; break;
            case west: q1 = ne; q2 = se; break;
            }
            total += sum_adjacent(q, q1, q2, size);
        }
    }
    return total;
}

// Independent perimeter: scan the image function row by row.
inline std::uint64_t scan_perimeter(const image& img) {
    bool rows[2][std::int64_t{1} << max_depth];
    bool* prev = rows[0];
    bool* cur = rows[1];
    const std::int64_t n = img.n;
    std::uint64_t total = 0;
    for (std::int64_t y = 0; y < n; ++y) {
        for (std::int64_t x = 0; x < n; ++x) cur[x] = img.black(x, y);
        for (std::int64_t x = 0; x < n; ++x) {
            const bool left = x > 0 && cur[x - 1];
            if (cur[x] != left) ++total;                        // vertical edge on the west side
            if (y > 0 ? cur[x] != prev[x] : cur[x]) ++total;    // horizontal edge on the north side
        }
        if (cur[n - 1]) ++total;                                // east border
        bool* t = prev;
        prev = cur;
        cur = t;
    }
    for (std::int64_t x = 0; x < n; ++x)
        if (prev[x]) ++total;                                   // south border
    return total;
}

inline int problem_size(scale s) {
    switch (s) {
    case scale::quick: return 11;
    case scale::standard: return 13;   // the paper's depth 12 runs in ~0.2 s
    case scale::full: return 12;   // paper: depth 12
    }
    return 0;
}

// The whole program; run_perimeter below is its public entry point.
template <bench::policy P>
std::uint64_t run(P& alloc, scale s) {
    const int depth = problem_size(s);
    if (depth < 8 || depth > max_depth) throw std::runtime_error("perimeter: unsupported depth");
    const std::int64_t n = std::int64_t{1} << depth;
    const image img{n, static_cast<std::uint64_t>(2 * (n / 256))};

    quad_node* root = make_tree(alloc, img, 0, 0, n, nullptr, 0);
    counts c;
    const std::uint64_t per = perimeter(root, static_cast<std::uint64_t>(n), c);
    release(alloc, root);

    if (per != scan_perimeter(img)) throw std::runtime_error("perimeter: differs from the pixel scan");
    // a full quadtree: every grey node has exactly four children
    if (c.nodes != 1 + 4 * (c.nodes - c.black - c.white))
        throw std::runtime_error("perimeter: malformed quadtree");
    std::uint64_t h = combine(per, c.nodes);
    h = combine(h, c.black);
    return combine(h, c.white);
}

} // namespace perimeter_impl

template <bench::policy P>
std::uint64_t run_perimeter(P& alloc, scale s) {
    return perimeter_impl::run(alloc, s);
}

} // namespace bench::olden
