// hashtext.hpp -- PostgreSQL's hashtext(), for routing a name to its farm partition.
#pragma once

#include <cstdint>
#include <string_view>

namespace dlock::internal {

/// The value of PostgreSQL's hashtext(name) under a deterministic collation:
/// hash_any over the name's bytes (src/common/hashfn.c, Bob Jenkins' lookup3
/// as PostgreSQL adapted it), as the same bits the server's int4 holds.
[[nodiscard]] std::uint32_t hashtext(std::string_view bytes) noexcept;

} // namespace dlock::internal
