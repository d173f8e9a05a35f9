// transaction.cpp -- holds, assert_holds, fence and commit in the caller's transaction.
#include "dlock/transaction.hpp"

#include <pqxx/pqxx>

#include "error_mapping.hpp"

namespace dlock {

bool holds(pqxx::transaction_base& txn, std::string_view lock_name, std::int64_t fencing_token) {
    const std::string name{lock_name};
    try {
        const pqxx::result r =
            txn.exec_params("SELECT dlock.holds($1, $2)", name, static_cast<long long>(fencing_token));
        return r.size() == 1 && !r[0][0].is_null() && r[0][0].as<bool>();
    } catch (...) {
        internal::rethrow_mapped(name);
    }
}

void assert_holds(pqxx::transaction_base& txn, std::string_view lock_name, std::int64_t fencing_token) {
    const std::string name{lock_name};
    try {
        txn.exec_params("SELECT dlock.assert_holds($1, $2)", name, static_cast<long long>(fencing_token));
    } catch (...) {
        internal::rethrow_mapped(name);
    }
}

void fence(pqxx::transaction_base& txn, std::string_view resource, std::int64_t fencing_token) {
    const std::string name{resource};
    try {
        txn.exec_params("SELECT dlock.fence($1, $2)", name, static_cast<long long>(fencing_token));
    } catch (...) {
        internal::rethrow_mapped(name);
    }
}

outcome commit(pqxx::transaction_base& txn) {
    // Registered only for the COMMIT; passes every notice on to the caller's handlers.
    internal::notice_watch watch{txn.conn()};
    try {
        txn.commit();
    } catch (const std::exception& e) {
        if (internal::is_unknown_outcome(e)) return outcome::unknown;
        internal::rethrow_mapped({});
    }
    return watch.uncertain() ? outcome::unknown : outcome::done;
}

} // namespace dlock
