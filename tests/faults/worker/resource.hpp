// tests/faults/worker/resource.hpp -- the fenced writes a worker makes while it
// believes it holds a lock.
//
// Three kinds of resource row per lock name L, all in the lock's database:
//   g  res_g: read-modify-write (read the counter, write counter + 1) guarded by
//      dlock.holds(L, token) and the enforce_fencing trigger on its token column;
//   t  res_t: atomic increment, checked only by the enforce_fencing trigger;
//   f  res_f: atomic increment after dlock.fence('f:L', token), no trigger.
// Every committed write also inserts a write_log row (same transaction), which
// the checker compares with the history. With fencing off (the negative
// control) the checks are skipped and the tables carry no trigger.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "session.hpp"

namespace faults {

struct write_request {
    char kind = 'g';
    std::string lock_name;
    std::int64_t token = 0;
    std::string worker_id;
    std::int64_t op_id = 0;
    bool fencing = true;
    /// Pause between the read and the write of a read-modify-write.
    std::chrono::milliseconds inside_delay{0};
};

struct write_result {
    op_result outcome;
    std::int64_t before = -1;
    std::int64_t after = -1;
};

[[nodiscard]] write_result fenced_write(db_session& session, const write_request& request);

} // namespace faults
