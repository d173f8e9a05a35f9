// tests/faults/worker/history.hpp -- the history file a fault-harness worker writes.
//
// One JSON object per line. Every operation has an "invoke" line and exactly one
// completion line ("ok", "refused", "fail" or "unknown") with the same worker id
// and operation id. Times are CLOCK_MONOTONIC nanoseconds read with a raw system
// call, so libfaketime (scenario 6 fakes the worker's clocks) cannot touch them
// and they compare with the orchestrator's time.monotonic_ns().
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace faults {

/// CLOCK_MONOTONIC in nanoseconds, bypassing any LD_PRELOAD interposition.
[[nodiscard]] std::int64_t history_clock_ns() noexcept;

/// Builds one history line field by field.
class record {
public:
    record(std::string_view worker, std::int64_t op_id, std::string_view event);

    record& str(std::string_view key, std::string_view value);
    record& num(std::string_view key, std::int64_t value);
    record& flag(std::string_view key, bool value);

    /// The finished line, without the newline.
    [[nodiscard]] std::string line() const;

private:
    std::string m_text;
};

/// Appends lines to the history file; each line is written with one write(2).
class history_file {
public:
    explicit history_file(const std::string& path);
    history_file(const history_file&) = delete;
    history_file& operator=(const history_file&) = delete;
    history_file(history_file&&) = delete;
    history_file& operator=(history_file&&) = delete;
    ~history_file() noexcept;

    void append(const record& entry);

private:
    int m_fd = -1;
};

} // namespace faults
