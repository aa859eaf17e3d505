// `span_registry<Source, Options>`: the last stage of the back end, the one a
// heap talks to. It takes spans from the span pool, records every page of each
// in the process's page map (so any pointer into a span finds it: free(p)
// without a size, usable_size, the owning heap, a foreign or interior pointer
// refused), keeps the list of spans the heap holds, and undoes all of that when
// a span goes back.
//
//   source  ->  span_pool (regions, free ranges, retention)  ->  span_registry (page map, spans held)
//
// The pool stage is any span_provider (span_provider.hpp): span_pool unless
// the heap's options name another (`template <source S> using pool = …`).
//
// Both heap kinds (exact-size `heap`, splitting `block_heap`) sit on it, so no
// span bookkeeping is written twice.
#pragma once
#include <cstddef>
#include <cstdint>
#include <utility>

#include <boost/intrusive/list.hpp>

#include <allotheque/backend/page_map.hpp>
#include <allotheque/backend/span.hpp>
#include <allotheque/backend/span_pool.hpp>
#include <allotheque/backend/span_provider.hpp>
#include <allotheque/detail/bits.hpp>
#include <allotheque/heap_options.hpp>
#include <allotheque/sources/source.hpp>

namespace allotheque::backend {

template <source S, heap_options_like Options>
class span_registry {
    using span_list = bi::list<span, bi::member_hook<span, span::list_hook, &span::by_age>, bi::constant_time_size<false>>;
    static constexpr std::size_t pages(std::size_t bytes) noexcept { return bytes / detail::page_size; }

public:
    using pool_type = pool_for<S, Options>;
    static_assert(check_span_provider<pool_type>());

    span_registry() requires std::default_initializable<S> = default;
    explicit span_registry(S s) : pool_(std::move(s)) {}
    span_registry(const span_registry&) = delete;
    span_registry& operator=(const span_registry&) = delete;
    ~span_registry() { release_all(); }

    // A span of `bytes` in state st, held by `owner`, every page recorded; or
    // nullptr when the source refuses or the page map cannot record it (then
    // nothing is held).
    span* open(std::size_t bytes, const void* hint, span_state st, const void* owner) noexcept {
        span* sp = pool_.take(bytes, hint);
        if (!sp) return nullptr;
        sp->state = st;
        sp->owner = owner;
        sp->clear_in_use();   // here, not in the pool: any pool stage may hand out a span
        if (!page_map::instance().set(sp->base, pages(bytes), sp)) {
            pool_.give(sp);
            return nullptr;
        }
        held_.push_back(*sp);
        ++count_[index(st)];
        bytes_[index(st)] += bytes;
        return sp;
    }
    // Gives sp back to the pool (its pages no longer map to anything).
    void close(span* sp) noexcept {
        page_map::instance().clear(sp->base, pages(sp->bytes));
        held_.erase(held_.iterator_to(*sp));
        --count_[index(sp->state)];
        bytes_[index(sp->state)] -= sp->bytes;
        pool_.give(sp);
    }
    // Grows sp in place into the free pages after it, or gives its tail back.
    bool resize(span* sp, std::size_t bytes) noexcept {
        const std::size_t was = sp->bytes;
        if (bytes > was) {
            if (!pool_.extend(sp, bytes)) return false;
            if (!page_map::instance().set(sp->base + was, pages(bytes - was), sp)) {
                pool_.shrink(sp, was);
                return false;
            }
        } else if (bytes < was) {
            page_map::instance().clear(sp->base + bytes, pages(was - bytes));
            if (!pool_.shrink(sp, bytes)) {   // no record for the tail: keep it
                page_map::instance().set(sp->base + bytes, pages(was - bytes), sp);
                return true;
            }
        }
        bytes_[index(sp->state)] += sp->bytes;
        bytes_[index(sp->state)] -= was;
        return true;
    }
    // Every span back to the source (what they held becomes invalid).
    void release_all() noexcept {
        for (span& sp : held_) page_map::instance().clear(sp.base, pages(sp.bytes));
        held_.clear();
        for (auto& c : count_) c = 0;
        for (auto& b : bytes_) b = 0;
        pool_.release_all();
    }
    // Every span back to the pool (kept for reuse or given back by its policy).
    void close_all() noexcept {
        while (!held_.empty()) close(&held_.front());
    }
    void retag(const void* owner) noexcept {
        for (span& sp : held_) sp.owner = owner;
    }
    template <class F>
    void for_each(F&& f) {
        for (span& sp : held_) f(sp);
    }

    std::size_t count(span_state st) const noexcept { return count_[index(st)]; }
    std::size_t bytes(span_state st) const noexcept { return bytes_[index(st)]; }
    pool_type& pool() noexcept { return pool_; }
    const pool_type& pool() const noexcept { return pool_; }

private:
    static constexpr std::size_t index(span_state st) noexcept { return static_cast<std::size_t>(st); }

    pool_type pool_{};
    span_list held_;
    std::size_t count_[6] = {}, bytes_[6] = {};   // per span_state
};

} // namespace allotheque::backend
