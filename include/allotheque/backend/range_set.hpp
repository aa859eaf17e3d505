// Free address ranges, coalesced: the one structure behind a span pool's free
// spans and a source's free address space (arena_source, sbrk_source).
//
// Each range is a `span` record in state free, kept in two Boost.Intrusive
// red-black trees: by address (to find the neighbours a returned range merges
// with) and by (size, address) (best fit: the smallest range that is large
// enough, the lowest address among equals, so memory is reused from the bottom
// up). Ranges merge only within one region (the same source allocation, as
// sources give back exactly what they handed out); a set whose ranges are all
// one address space passes region == nullptr and merges freely.
//
// Ranges whose pages may be resident (`dirty` > 0) are also on an age list,
// oldest first (`freed_at`, the newest part's time, after a merge): the order
// in which a retention policy gives pages back.
// Not thread-safe; the owner serialises.
#pragma once
#include <cstddef>
#include <functional>
#include <iterator>
#include <memory>

#include <boost/intrusive/list.hpp>
#include <boost/intrusive/set.hpp>

#include <allotheque/backend/span.hpp>

namespace allotheque::backend {

class range_set {
    struct address_key {
        using type = const std::byte*;
        type operator()(const span& s) const noexcept { return s.base; }
    };
    struct size_order {
        bool operator()(const span& a, const span& b) const noexcept {
            return a.bytes != b.bytes ? a.bytes < b.bytes : std::less<>{}(a.base, b.base);
        }
    };
    using by_address_t = bi::set<span, bi::member_hook<span, span::set_hook, &span::by_address>,
                                 bi::key_of_value<address_key>, bi::constant_time_size<false>>;
    using by_size_t = bi::multiset<span, bi::member_hook<span, span::set_hook, &span::by_size>,
                                   bi::compare<size_order>, bi::constant_time_size<false>>;
    using by_age_t = bi::list<span, bi::member_hook<span, span::list_hook, &span::by_age>,
                              bi::constant_time_size<false>>;

public:
    range_set() = default;
    range_set(const range_set&) = delete;
    range_set& operator=(const range_set&) = delete;

    // Adds free range s, merged with free neighbours of the same region. Every
    // record absorbed by the merge is passed to `dispose`. Returns the record
    // that now holds s's bytes.
    template <class Dispose>
    span* insert(span* s, Dispose&& dispose) noexcept {
        s->state = span_state::free;
        auto next = by_address_.lower_bound(s->base);
        if (next != by_address_.end() && next->base == s->end() && next->region == s->region) {
            span* n = &*next;
            ++next;
            unlink(n);
            s->bytes += n->bytes;
            s->dirty += n->dirty;
            if (n->freed_at > s->freed_at) s->freed_at = n->freed_at;
            dispose(n);
        }
        if (next != by_address_.begin()) {
            auto prev = std::prev(next);
            if (prev->end() == s->base && prev->region == s->region) {
                span* p = &*prev;
                unlink(p);
                p->bytes += s->bytes;
                p->dirty += s->dirty;
                if (s->freed_at > p->freed_at) p->freed_at = s->freed_at;
                dispose(s);
                s = p;
            }
        }
        link(s);
        return s;
    }

    // The smallest range of at least n bytes (lowest address among equals), or nullptr.
    span* best_fit(std::size_t n) noexcept {
        // Ranges compare by (bytes, base): a probe of n bytes at the null address
        // sorts before every range of n bytes.
        span probe;
        probe.bytes = n;
        probe.base = nullptr;
        auto it = by_size_.lower_bound(probe);
        return it == by_size_.end() ? nullptr : &*it;
    }
    // The range starting exactly at p, or nullptr.
    span* starting_at(const std::byte* p) noexcept {
        auto it = by_address_.find(p);
        return it == by_address_.end() ? nullptr : &*it;
    }
    // The range containing p, or nullptr.
    span* containing(const std::byte* p) noexcept {
        auto it = by_address_.upper_bound(p);
        if (it == by_address_.begin()) return nullptr;
        --it;
        return it->contains(p) ? &*it : nullptr;
    }

    void erase(span* s) noexcept { unlink(s); }

    // Cuts n bytes (less than s->bytes) off the front of s, which stays in the
    // set with the rest. Where in a range its dirty bytes lie is not known, so
    // the rest stays dirty as long as anything was (conservative: dirty == 0
    // must mean "reads as zero").
    void shrink_front(span* s, std::size_t n) noexcept {
        by_size_.erase(by_size_.iterator_to(*s));
        s->base += n;   // stays between the same neighbours: the address order holds
        s->bytes -= n;
        bytes_ -= n;
        if (s->dirty > s->bytes) {
            dirty_bytes_ -= s->dirty - s->bytes;
            s->dirty = s->bytes;
        }
        by_size_.insert(*s);
    }

    // Hands out the first n bytes (at most s->bytes) of s: the address-space
    // sources' allocation. A range used up whole leaves the set and its record
    // goes to `dispose`.
    template <class Dispose>
    std::byte* take_front(span* s, std::size_t n, Dispose&& dispose) noexcept {
        std::byte* p = s->base;
        if (s->bytes == n) {
            unlink(s);
            dispose(s);
        } else {
            shrink_front(s, n);
        }
        return p;
    }

    // Oldest range whose pages may be resident, or nullptr.
    span* oldest_dirty() noexcept { return by_age_.empty() ? nullptr : &by_age_.front(); }
    // After the owner gave s's pages back: s now reads as zero.
    void mark_clean(span* s) noexcept {
        if (s->dirty == 0) return;
        dirty_bytes_ -= s->dirty;
        s->dirty = 0;
        by_age_.erase(by_age_.iterator_to(*s));
    }

    // Removes and returns some range (for releasing everything), or nullptr.
    span* pop() noexcept {
        if (by_address_.empty()) return nullptr;
        span* s = &*by_address_.begin();
        unlink(s);
        return s;
    }
    template <class F>
    void for_each(F&& f) {
        for (span& s : by_address_) f(s);
    }

    bool empty() const noexcept { return by_address_.empty(); }
    std::size_t bytes() const noexcept { return bytes_; }
    std::size_t dirty_bytes() const noexcept { return dirty_bytes_; }
    std::size_t count() const noexcept { return count_; }

private:
    void link(span* s) noexcept {
        // The tree links share their bytes with the fields of a span in use.
        std::construct_at(&s->by_address);
        std::construct_at(&s->by_size);
        by_address_.insert(*s);
        by_size_.insert(*s);
        if (s->dirty) by_age_.push_back(*s);
        bytes_ += s->bytes;
        dirty_bytes_ += s->dirty;
        ++count_;
    }
    void unlink(span* s) noexcept {
        by_address_.erase(by_address_.iterator_to(*s));
        by_size_.erase(by_size_.iterator_to(*s));
        if (s->dirty) by_age_.erase(by_age_.iterator_to(*s));
        bytes_ -= s->bytes;
        dirty_bytes_ -= s->dirty;
        --count_;
    }

    by_address_t by_address_;
    by_size_t by_size_;
    by_age_t by_age_;
    std::size_t bytes_ = 0, dirty_bytes_ = 0, count_ = 0;
};

} // namespace allotheque::backend
