// json.hpp -- JSON strings written the way the pg_dlock server writes them
// (internal: used by the library and the dlock command line, not installed).
#pragma once

#include <string>
#include <string_view>

namespace dlock::internal {

/// `text` as a JSON string literal, quotes included, escaped exactly as
/// PostgreSQL's escape_json escapes it (the server's event payloads): \" \\ \b
/// \f \n \r \t, other characters below 0x20 as \u00xx, every other byte as it
/// is. So the result can be searched for in a payload, and the command line's
/// JSON output reads like the server's.
[[nodiscard]] std::string json_quote(std::string_view text);

} // namespace dlock::internal
