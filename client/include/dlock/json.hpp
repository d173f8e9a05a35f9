// dlock/json.hpp -- JSON strings written the way the pg_dlock server writes them.
#pragma once

#include <string>
#include <string_view>

namespace dlock {

/// `text` as a JSON string literal, quotes included, escaped exactly as
/// PostgreSQL's escape_json escapes it (the server's event payloads on the
/// dlock_events channel): \" \\ \b \f \n \r \t, other characters below 0x20 as
/// \u00xx, every other byte as it is. So the result can be searched for in a
/// payload (`"lock_name":` followed by it), and JSON written with it reads
/// like the server's.
[[nodiscard]] std::string json_quote(std::string_view text);

} // namespace dlock
