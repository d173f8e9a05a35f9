// tests/faults/worker/resource.hpp -- the fenced writes a worker makes while it
// believes it holds a lock.
//
// Three kinds of resource row per lock name L, all in the lock's database:
//   g  res_g: read-modify-write (read the counter, write counter + 1) guarded by
//      dlock.holds(L, token) and the enforce_fencing trigger on its token column;
//   t  res_t: atomic increment, checked only by the enforce_fencing trigger;
//   f  res_f: atomic increment after dlock.fence('f:L', token), no trigger.
// and, with a store directory, one outside the database:
//   x  the file STORE/x-L: a store that remembers the highest token it accepted
//      and refuses a lower one (PD001, as dlock.fence does), the way an external
//      system is fenced. Each accepted write appends "token counter worker op"
//      and is fsynced before it is acknowledged; the harness reads the files
//      into the final state's write_log.
// Every committed write also inserts a write_log row (same transaction), which
// the checker compares with the history. With fencing off (the negative
// control) the checks are skipped and the tables carry no trigger.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "history.hpp"
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

/// A write of kind 'x' to the file store in directory store.
[[nodiscard]] write_result store_write(const std::string& store, const write_request& request);

/// The history's "invoke" line of a write, as every worker mode records it;
/// local_valid: the writer believed its lease held. The caller may add fields.
[[nodiscard]] record write_invoked(const write_request& request, std::string_view owner, bool local_valid);

/// The history's line of a write's outcome (its before and after when it may
/// have committed).
[[nodiscard]] record write_completed(const write_request& request, const write_result& result);

} // namespace faults
