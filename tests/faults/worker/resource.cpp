// tests/faults/worker/resource.cpp -- fenced writes on the resource tables.
#include "resource.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <sstream>
#include <thread>

#ifdef FAULTS_WITH_CLIENT
#include <dlock/transaction.hpp>
#endif

namespace faults {

namespace {

bool holds(pqxx::work& txn, const std::string& lock_name, std::int64_t token) {
#ifdef FAULTS_WITH_CLIENT
    return dlock::holds(txn, lock_name, token);
#else
    return txn.exec_params1("SELECT dlock.holds($1, $2)", lock_name, token)[0].as<bool>();
#endif
}

void fence(pqxx::work& txn, const std::string& resource, std::int64_t token) {
#ifdef FAULTS_WITH_CLIENT
    dlock::fence(txn, resource, token);
#else
    (void)txn.exec_params("SELECT dlock.fence($1, $2)", resource, token);
#endif
}

/// Commits; ok, or unknown when the commit is in doubt or only local.
result_kind commit(pqxx::work& txn, db_session& session) {
#ifdef FAULTS_WITH_CLIENT
    (void)session;
    return dlock::commit(txn) == dlock::outcome::done ? result_kind::ok : result_kind::unknown;
#else
    txn.commit();
    return session.warnings() > 0 ? result_kind::unknown : result_kind::ok;
#endif
}

} // namespace

write_result fenced_write(db_session& session, const write_request& request) {
    write_result r;
    bool commit_sent = false;
    session.clear_warnings();
    const std::string table = std::string("res_") + request.kind;
    const std::string resource = std::string(1, request.kind) + ":" + request.lock_name;
    try {
        pqxx::work txn(session.conn());
        if (request.kind == 'g') {
            if (request.fencing && !holds(txn, request.lock_name, request.token)) {
                txn.abort();
                r.outcome.kind = result_kind::refused;
                r.outcome.why = "not_held";
                return r;
            }
            r.before =
                txn.exec_params1("SELECT counter FROM res_g WHERE id = $1", request.lock_name)[0].as<std::int64_t>();
            if (request.inside_delay.count() > 0) std::this_thread::sleep_for(request.inside_delay);
            r.after = r.before + 1;
            txn.exec_params0("UPDATE res_g SET counter = $2, token = $3, writer = $4 WHERE id = $1", request.lock_name,
                             r.after, request.token, request.worker_id);
        } else {
            if (request.kind == 'f' && request.fencing) fence(txn, resource, request.token);
            r.after = txn.exec_params1("UPDATE " + table +
                                           " SET counter = counter + 1, token = $2, writer = $3"
                                           " WHERE id = $1 RETURNING counter",
                                       request.lock_name, request.token, request.worker_id)[0]
                          .as<std::int64_t>();
            r.before = r.after - 1;
        }
        txn.exec_params0("INSERT INTO write_log (resource, token, worker, op, before, after)"
                         " VALUES ($1, $2, $3, $4, $5, $6)",
                         resource, request.token, request.worker_id, request.op_id, r.before, r.after);
        commit_sent = true;
        r.outcome.kind = commit(txn, session);
        if (r.outcome.kind == result_kind::unknown) r.outcome.why = "commit";
    } catch (...) {
        r.outcome = classify(std::current_exception(), commit_sent, session);
    }
    return r;
}

write_result store_write(const std::string& store, const write_request& request) {
    write_result r;
    const std::string path = store + "/x-" + request.lock_name;
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) {
        r.outcome.kind = result_kind::fail;
        r.outcome.why = "store_open";
        return r;
    }
    // One writer at a time: the lock is the store's own, not the lease.
    while (::flock(fd, LOCK_EX) != 0 && errno == EINTR) {
    }
    std::string text;
    char buffer[65536];
    ssize_t n;
    ::lseek(fd, 0, SEEK_SET);
    while ((n = ::read(fd, buffer, sizeof buffer)) > 0) text.append(buffer, static_cast<std::size_t>(n));
    std::int64_t highest = 0;
    std::int64_t counter = 0;
    std::istringstream lines(text);
    std::string line;
    while (std::getline(lines, line)) {
        std::istringstream fields(line);
        std::int64_t token = 0;
        std::int64_t value = 0;
        if (fields >> token >> value) {
            highest = token > highest ? token : highest;
            counter = value;
        }
    }
    if (request.fencing && request.token < highest) {
        ::close(fd);
        r.outcome.kind = result_kind::refused;
        r.outcome.why = "PD001";
        return r;
    }
    r.before = counter;
    r.after = counter + 1;
    const std::string entry = std::to_string(request.token) + " " + std::to_string(r.after) + " " +
                              request.worker_id + " " + std::to_string(request.op_id) + "\n";
    const bool written = ::write(fd, entry.data(), entry.size()) == static_cast<ssize_t>(entry.size()) &&
                         ::fsync(fd) == 0;
    ::close(fd);
    r.outcome.kind = written ? result_kind::ok : result_kind::unknown;
    if (!written) r.outcome.why = "store_write";
    return r;
}

record write_invoked(const write_request& request, std::string_view owner, bool local_valid) {
    record r(request.worker_id, request.op_id, "invoke");
    r.str("op", "write")
        .str("lock", request.lock_name)
        .str("res", std::string(1, request.kind) + ":" + request.lock_name)
        .str("owner", owner)
        .num("token", request.token)
        .flag("local_valid", local_valid);
    return r;
}

record write_completed(const write_request& request, const write_result& result) {
    record done(request.worker_id, request.op_id, to_string(result.outcome.kind));
    if (!result.outcome.why.empty()) done.str("why", result.outcome.why);
    if (result.outcome.kind == result_kind::ok || result.outcome.kind == result_kind::unknown)
        done.num("before", result.before).num("after", result.after);
    return done;
}

} // namespace faults
