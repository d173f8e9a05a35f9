// hashtext.cpp -- PostgreSQL's hash_any over a name's bytes (src/common/hashfn.c).
//
// The farm routes a name to partition hashtext(name) & (N - 1) (farm/proxy.sql);
// a client that routes by itself must compute the very same bits, or it takes a
// name on a partition the proxy does not send it to. hash_any reads whole words
// on little-endian machines and bytes otherwise; both give the value below, which
// reads bytes in little-endian order. PostgreSQL on a big-endian machine hashes
// differently (a known limit, docs/farm.md).
#include "hashtext.hpp"

namespace dlock::internal {
namespace {

constexpr std::uint32_t rot(std::uint32_t x, int k) noexcept {
    return (x << k) | (x >> (32 - k));
}

void mix(std::uint32_t& a, std::uint32_t& b, std::uint32_t& c) noexcept {
    a -= c; a ^= rot(c, 4);  c += b;
    b -= a; b ^= rot(a, 6);  a += c;
    c -= b; c ^= rot(b, 8);  b += a;
    a -= c; a ^= rot(c, 16); c += b;
    b -= a; b ^= rot(a, 19); a += c;
    c -= b; c ^= rot(b, 4);  b += a;
}

void final_mix(std::uint32_t& a, std::uint32_t& b, std::uint32_t& c) noexcept {
    c ^= b; c -= rot(b, 14);
    a ^= c; a -= rot(c, 11);
    b ^= a; b -= rot(a, 25);
    c ^= b; c -= rot(b, 16);
    a ^= c; a -= rot(c, 4);
    b ^= a; b -= rot(a, 14);
    c ^= b; c -= rot(b, 24);
}

std::uint32_t word(const unsigned char* k) noexcept {
    return k[0] | (std::uint32_t{k[1]} << 8) | (std::uint32_t{k[2]} << 16) | (std::uint32_t{k[3]} << 24);
}

} // namespace

std::uint32_t hashtext(std::string_view bytes) noexcept {
    const auto* k = reinterpret_cast<const unsigned char*>(bytes.data());
    // hash_any takes the length as an int; a name longer than that is refused by the server anyway
    auto len = static_cast<std::uint32_t>(bytes.size());
    std::uint32_t a = 0x9e3779b9 + len + 3923095;
    std::uint32_t b = a;
    std::uint32_t c = a;
#ifdef DLOCK_PLANT_HASH_BUG
    // the negative control of client/tests/hashtext_test.cpp: one block boundary off by one
    while (len > 12) {
#else
    while (len >= 12) {
#endif
        a += word(k);
        b += word(k + 4);
        c += word(k + 8);
        mix(a, b, c);
        k += 12;
        len -= 12;
    }
    // the last 0 to 11 bytes; the lowest byte of c stays for the length, as in hash_any
    switch (len) {
    case 11: c += std::uint32_t{k[10]} << 24; [[fallthrough]];
    case 10: c += std::uint32_t{k[9]} << 16; [[fallthrough]];
    case 9: c += std::uint32_t{k[8]} << 8; [[fallthrough]];
    case 8: b += std::uint32_t{k[7]} << 24; [[fallthrough]];
    case 7: b += std::uint32_t{k[6]} << 16; [[fallthrough]];
    case 6: b += std::uint32_t{k[5]} << 8; [[fallthrough]];
    case 5: b += k[4]; [[fallthrough]];
    case 4: a += std::uint32_t{k[3]} << 24; [[fallthrough]];
    case 3: a += std::uint32_t{k[2]} << 16; [[fallthrough]];
    case 2: a += std::uint32_t{k[1]} << 8; [[fallthrough]];
    case 1: a += k[0]; break;
    default: break;
    }
    final_mix(a, b, c);
    return c;
}

} // namespace dlock::internal
