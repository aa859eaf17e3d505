// Pairs a trace's allocations with their frees: every allocation becomes an
// object with a size, a call site and a lifetime. The summariser and the
// replayer both work on objects, never on raw addresses.
//
// Anomalies are counted, not fatal: a free of an address never handed out
// (memory from before the tracer started, or a program bug), an allocation at
// an address still live (a lost free) — the older object is closed there.
#ifndef ALLOTHEQUE_TRACE_OBJECTS_HPP
#define ALLOTHEQUE_TRACE_OBJECTS_HPP

#include <bit>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <utility>
#include <vector>

#include "reader.hpp"

namespace allotheque::trace {

inline constexpr std::uint32_t no_object = std::numeric_limits<std::uint32_t>::max();
inline constexpr std::uint64_t still_live = std::numeric_limits<std::uint64_t>::max();

struct object {
    std::uint64_t address = 0;  // in the traced run
    std::uint64_t size = 0;
    std::uint64_t site = 0;
    std::uint64_t born_ns = 0;
    std::uint64_t died_ns = still_live;
    std::uint32_t born_event = 0;
    std::uint32_t died_event = no_object;  // event index, or no_object if never freed
    std::uint32_t thread = 0;
    std::uint8_t align_log2 = 0;
};

struct timeline {
    std::vector<object> objects;
    // Per event: the object it creates and the object it ends (no_object when
    // none); a realloc does both.
    std::vector<std::uint32_t> born, ended;
    std::uint64_t unknown_frees = 0;  // free of an address not live in the trace
    std::uint64_t null_frees = 0;
    std::uint64_t failed = 0;         // allocations that returned null
    std::uint64_t reused_live = 0;    // allocation at a still-live address
};

namespace detail {

// Open-addressing hash map from a live address (never 0) to V: linear
// probing, deletion by backward shift, at most 3/4 full. One flat array, so
// a live object costs its 8-byte key and its value, not a node.
template <class V>
class address_map {
public:
    static constexpr std::size_t npos = ~std::size_t(0);
    // The slot holding `key`, or npos.
    std::size_t find(std::uint64_t key) const noexcept {
        if (slots_.empty() || key == 0) return npos;  // 0 marks an empty slot
        for (std::size_t i = home(key);; i = (i + 1) & mask_) {
            if (slots_[i].key == key) return i;
            if (slots_[i].key == 0) return npos;
        }
    }
    V& at(std::size_t i) noexcept { return slots_[i].value; }
    // `key` (not 0) must not be present.
    void insert(std::uint64_t key, const V& value) {
        if ((size_ + 1) * 4 > slots_.size() * 3) grow();
        std::size_t i = home(key);
        while (slots_[i].key != 0) i = (i + 1) & mask_;
        slots_[i] = slot{key, value};
        ++size_;
    }
    // Empties slot `i` (from find()).
    void erase(std::size_t i) noexcept {
        // Backward shift: pull later entries of the probe run into the hole
        // unless that would move them before their home slot.
        for (std::size_t j = (i + 1) & mask_; slots_[j].key != 0; j = (j + 1) & mask_) {
            const std::size_t h = home(slots_[j].key);
            if (((j - h) & mask_) >= ((j - i) & mask_)) {
                slots_[i] = slots_[j];
                i = j;
            }
        }
        slots_[i].key = 0;
        --size_;
    }
    std::size_t size() const noexcept { return size_; }

private:
    struct slot {
        std::uint64_t key = 0;
        V value{};
    };
    std::size_t home(std::uint64_t key) const noexcept {
        return static_cast<std::size_t>((key * 0x9e3779b97f4a7c15ull) >> shift_) & mask_;
    }
    void grow() {
        std::vector<slot> old = std::move(slots_);
        const std::size_t n = old.empty() ? 1024 : old.size() * 2;
        slots_.assign(n, slot{});
        mask_ = n - 1;
        shift_ = 64 - static_cast<unsigned>(std::countr_zero(n));
        for (const slot& s : old) {
            if (s.key == 0) continue;
            std::size_t i = home(s.key);
            while (slots_[i].key != 0) i = (i + 1) & mask_;
            slots_[i] = s;
        }
    }
    std::vector<slot> slots_;
    std::size_t size_ = 0, mask_ = 0;
    unsigned shift_ = 64;
};

} // namespace detail

// Pairs allocations with their releases one event at a time, in time order:
// the single definition of what an object is, shared by resolve() (the whole
// timeline, for the replay planner) and the summary (which streams, keeping
// only the live objects). Each live object carries a Payload.
template <class Payload>
class pairer {
public:
    // For event `e`: calls `end(payload, lost)` for each object the event
    // ends — a free's object or a realloc's old block (lost = false), or an
    // object still live at an address handed out again (lost = true) — then,
    // if the event creates an object, stores `make(id)` for it and returns
    // its id (ids count objects from 0 in creation order), else no_object.
    // The payload is all that is kept per live object: put the id in it if
    // `end` needs it.
    template <class End, class Make>
    std::uint32_t feed(const event& e, End&& end, Make&& make) {
        if (is_free(e.kind)) {
            if (e.address == 0) ++null_frees;
            else close(e.address, end);
            return no_object;
        }
        if (e.failed) {
            ++failed;
            return no_object;
        }
        if (e.kind == op::realloc_ && e.old_address != 0) {
            close(e.old_address, end);
            if (e.address == 0) return no_object;  // realloc(p, 0) freed p
        }
        if (e.address == 0) return no_object;
        if (const std::size_t k = live_.find(e.address); k != live_.npos) {
            ++reused_live;
            end(std::as_const(live_.at(k)), true);
            live_.erase(k);
        }
        if (next_id_ == no_object) throw std::length_error("trace has more than 2^32 - 1 objects");
        const std::uint32_t id = next_id_++;
        live_.insert(e.address, make(id));
        return id;
    }
    std::uint32_t objects() const noexcept { return next_id_; }
    std::size_t live() const noexcept { return live_.size(); }

    std::uint64_t unknown_frees = 0;  // free of an address not live in the trace
    std::uint64_t null_frees = 0;
    std::uint64_t failed = 0;         // allocations that returned null
    std::uint64_t reused_live = 0;    // allocation at a still-live address

private:
    template <class End>
    void close(std::uint64_t address, End& end) {
        const std::size_t k = live_.find(address);
        if (k == live_.npos) {
            ++unknown_frees;
            return;
        }
        end(std::as_const(live_.at(k)), false);
        live_.erase(k);
    }
    detail::address_map<Payload> live_;
    std::uint32_t next_id_ = 0;
};

inline timeline resolve(const trace& t) {
    timeline r;
    const std::size_t n = t.events.size();
    r.born.assign(n, no_object);
    r.ended.assign(n, no_object);
    pairer<std::uint32_t> p;  // the object's id
    for (std::uint32_t i = 0; i < n; ++i) {
        const event& e = t.events[i];
        r.born[i] = p.feed(
            e,
            [&](std::uint32_t id, bool lost) {
                object& o = r.objects[id];
                o.died_ns = e.time_ns;
                o.died_event = i;
                if (!lost) r.ended[i] = id;
            },
            [&](std::uint32_t id) {
                r.objects.push_back(
                    object{e.address, e.size, e.site, e.time_ns, still_live, i, no_object, e.thread, e.align_log2});
                return id;
            });
    }
    r.unknown_frees = p.unknown_frees;
    r.null_frees = p.null_frees;
    r.failed = p.failed;
    r.reused_live = p.reused_live;
    return r;
}

} // namespace allotheque::trace

#endif
