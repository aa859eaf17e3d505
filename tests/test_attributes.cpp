// Attributes: the values each attribute reads from a chunk and from a request,
// on 47-bit user addresses, and the attribute concepts.
#include "catch.hpp"

#include <allotheque/attributes/address_bits.hpp>
#include <allotheque/attributes/attribute.hpp>
#include <allotheque/attributes/size.hpp>
#include <allotheque/request.hpp>

#include <cstddef>
#include <cstdint>

namespace al = allotheque;

namespace {
const std::byte* at(std::uintptr_t a) { return reinterpret_cast<const std::byte*>(a); }
const void* vat(std::uintptr_t a) { return reinterpret_cast<const void*>(a); }

struct not_an_attribute {};
// Everything an attribute needs but an unsigned value type: the concept must
// reject it for that alone (clang sees the members read by no code).
struct signed_attribute {
    using value_type = int;
    [[maybe_unused]] static constexpr bool is_explicit = true;
    [[maybe_unused]] static constexpr std::size_t stored_bytes = 4;
    static int of_chunk(const std::byte*, std::size_t) noexcept { return 0; }
    static int of_request(const al::request&) noexcept { return 0; }
};
} // namespace

// ---- concepts --------------------------------------------------------------
static_assert(al::attribute<al::size>);
static_assert(al::size_attribute<al::size>);
static_assert(!al::address_attribute<al::size>);
static_assert(al::attribute<al::kbit<16>> && al::address_attribute<al::kbit<16>>);
static_assert(al::address_attribute<al::vicinity<16>> && al::address_attribute<al::skbit<12, 16>>);
static_assert(al::address_attribute<al::page> && al::address_attribute<al::cache_set<>>);
static_assert(!al::size_attribute<al::page> && !al::size_attribute<al::kbit<31>>);
static_assert(!al::attribute<not_an_attribute>);
static_assert(!al::attribute<signed_attribute>, "attribute values must be unsigned");
static_assert(!al::attribute<int>);

// Explicit vs implicit: only size costs bytes in a class node.
static_assert(al::size::is_explicit && al::size::stored_bytes == sizeof(std::size_t));
static_assert(!al::page::is_explicit && al::page::stored_bytes == 0);
static_assert(!al::kbit<16>::is_explicit && al::kbit<16>::stored_bytes == 0);

// Bit ranges as documented in address_bits.hpp.
static_assert(al::address_bits_significant == 47);
static_assert(al::kbit<16>::lo == 31 && al::kbit<16>::width == 16);
static_assert(al::kbit<31>::lo == 16 && al::kbit<31>::width == 31);
static_assert(al::vicinity<16>::lo == 16 && al::vicinity<16>::width == 31);
static_assert(al::vicinity<16>::class_bytes == 64 * 1024);
static_assert(al::skbit<12, 16>::lo == 12 && al::skbit<12, 16>::width == 16);
static_assert(al::skbit<12, 16>::class_bytes == 4096);
static_assert(al::page::lo == 12 && al::page::width == 35 && al::page::class_bytes == 4096);
static_assert(al::cache_set<>::lo == 6 && al::cache_set<>::width == 10);
static_assert(al::cache_set<128, 64>::lo == 7 && al::cache_set<128, 64>::width == 6);
// of_address is constexpr.
static_assert(al::page::of_address(0x7fff12345678u) == 0x7fff12345u);

TEST_CASE("size reads the chunk size and the request size", "[attributes]") {
    alignas(16) std::byte buf[64];
    CHECK(al::size::of_chunk(buf, 48) == 48u);
    CHECK(al::size::of_chunk(buf, 0) == 0u);
    al::request r{200, buf, 64};
    CHECK(al::size::of_request(r) == 200u);
    r.hint = nullptr;
    CHECK(al::size::of_request(r) == 200u);   // the hint does not matter
}

TEST_CASE("address attributes on a 47-bit address", "[attributes]") {
    const std::uintptr_t a = 0x7fff12345678u;   // highest user half on x86-64
    CHECK(al::vicinity<16>::of_chunk(at(a), 8) == 0x7fff1234u);
    CHECK(al::vicinity<12>::of_chunk(at(a), 8) == 0x7fff12345u);
    CHECK(al::page::of_chunk(at(a), 8) == 0x7fff12345u);
    // kbit<16>: bits [31, 47): 0x7fff12345678 >> 31 = 0xfffe (bit 31 of a is 0).
    CHECK(al::kbit<16>::of_chunk(at(a), 8) == 0xfffeu);
    CHECK(al::kbit<1>::of_chunk(at(a), 8) == 1u);   // bit 46
    CHECK(al::kbit<31>::of_chunk(at(a), 8) == 0x7fff1234u);   // same as vicinity<16>
    CHECK(al::skbit<12, 16>::of_chunk(at(a), 8) == 0x2345u);
    CHECK(al::skbit<4, 8>::of_chunk(at(a), 8) == 0x67u);
    CHECK(al::cache_set<>::of_chunk(at(a), 8) == ((a >> 6) & 0x3ffu));
    CHECK(al::cache_set<>::of_chunk(at(a), 8) == 0x159u);
    CHECK(al::address_bits<0, 64>::of_chunk(at(a), 8) == a);
    CHECK(al::address_bits<3, 4>::of_chunk(at(a), 8) == 1u);   // 0x8 -> bit 3 set
    CHECK(al::address_bits<0, 3>::of_chunk(at(a), 8) == 0u);

    // The chunk size is irrelevant to an implicit attribute.
    CHECK(al::page::of_chunk(at(a), 1) == al::page::of_chunk(at(a), 1u << 20));
}

TEST_CASE("address attributes ignore bits above the range", "[attributes]") {
    // Bits at or above 47 are not part of kbit/vicinity/page.
    const std::uintptr_t hi = (std::uintptr_t{1} << 47) | 0x12345678u;
    CHECK(al::kbit<16>::of_chunk(at(hi), 8) == 0u);
    CHECK(al::vicinity<16>::of_chunk(at(hi), 8) == 0x1234u);
    CHECK(al::page::of_chunk(at(hi), 8) == 0x12345u);
    // skbit aliases every 2^(S+K) bytes.
    const std::uintptr_t b = 0x10002000u;
    CHECK(al::skbit<12, 16>::of_chunk(at(b), 8) == al::skbit<12, 16>::of_chunk(at(b + (std::uintptr_t{1} << 28)), 8));
    CHECK(al::skbit<12, 16>::of_chunk(at(b), 8) != al::skbit<12, 16>::of_chunk(at(b + 4096), 8));
}

TEST_CASE("a class key is the class, or equals no class", "[attributes]") {
    // Ranges that end at the top of user addresses compare by the shift
    // alone (hash_table's class_key): below 2^47 the key is the class...
    static_assert(al::vicinity<16>::keyed_by_shift && al::page::keyed_by_shift && al::kbit<16>::keyed_by_shift);
    static_assert(!al::skbit<12, 16>::keyed_by_shift && !al::cache_set<>::keyed_by_shift);
    const std::uintptr_t a = 0x7fff12345678u;
    CHECK(al::vicinity<16>::key_of_chunk(at(a)) == al::vicinity<16>::of_chunk(at(a), 8));
    CHECK(al::page::key_of_chunk(at(a)) == al::page::of_chunk(at(a), 8));
    CHECK(al::skbit<12, 16>::key_of_chunk(at(a)) == al::skbit<12, 16>::of_chunk(at(a), 8));
    // ...and above, where the class ignores the high bits, the key is at
    // least 2^width: no class has it, so a compare with a class fails.
    const std::uintptr_t hi = (std::uintptr_t{1} << 50) | 0x12345678u;
    CHECK(al::vicinity<16>::key_of_chunk(at(hi)) >= (std::uint64_t{1} << al::vicinity<16>::width));
    CHECK(al::vicinity<16>::key_of_chunk(at(hi)) != al::vicinity<16>::of_chunk(at(hi), 8));
    CHECK(al::skbit<12, 16>::key_of_chunk(at(hi)) == al::skbit<12, 16>::of_chunk(at(hi), 8));
}

TEST_CASE("class boundaries: same class within 2^lo bytes, next class after", "[attributes]") {
    const std::uintptr_t base = 0x55550000u;   // 64 KiB aligned
    CHECK(al::vicinity<16>::of_chunk(at(base), 8) == al::vicinity<16>::of_chunk(at(base + 0xffff), 8));
    CHECK(al::vicinity<16>::of_chunk(at(base + 0x10000), 8) == al::vicinity<16>::of_chunk(at(base), 8) + 1);
    CHECK(al::page::of_chunk(at(base + 4095), 8) == al::page::of_chunk(at(base), 8));
    CHECK(al::page::of_chunk(at(base + 4096), 8) == al::page::of_chunk(at(base), 8) + 1);
}

TEST_CASE("of_request reads the hint, not the size", "[attributes]") {
    const std::uintptr_t a = 0x7f0012345678u;
    al::request r{16, vat(a), 0};
    CHECK(al::page::of_request(r) == al::page::of_chunk(at(a), 16));
    CHECK(al::vicinity<16>::of_request(r) == 0x7f001234u);
    CHECK(al::kbit<16>::of_request(r) == al::kbit<16>::of_chunk(at(a), 16));
    CHECK(al::skbit<12, 16>::of_request(r) == 0x2345u);
    CHECK(al::cache_set<>::of_request(r) == al::cache_set<>::of_chunk(at(a), 16));

    r.size = 1u << 20;   // changing the size changes nothing
    CHECK(al::vicinity<16>::of_request(r) == 0x7f001234u);

    r.hint = nullptr;   // no hint: class 0
    CHECK(al::vicinity<16>::of_request(r) == 0u);
    CHECK(al::page::of_request(r) == 0u);
    CHECK(al::kbit<16>::of_request(r) == 0u);
}

TEST_CASE("a real object's attributes agree between chunk and request", "[attributes]") {
    static int object = 0;
    al::request r{sizeof object, &object, 0};
    const auto* p = reinterpret_cast<const std::byte*>(&object);
    CHECK(al::vicinity<16>::of_request(r) == al::vicinity<16>::of_chunk(p, 4));
    CHECK(al::page::of_request(r) == reinterpret_cast<std::uintptr_t>(&object) >> 12);
}
