// errors.cpp -- exception types and the one SQLSTATE mapping of the client.
#include "dlock/errors.hpp"

#include <cstring>
#include <string>

#include "dlock/options.hpp"
#include "error_mapping.hpp"

namespace dlock {

error::error(const std::string& message, std::string subject, std::string sqlstate)
    : std::runtime_error{message}, m_subject{std::move(subject)}, m_sqlstate{std::move(sqlstate)} {}

unknown_outcome_error::unknown_outcome_error(const std::string& message, std::string subject, std::string owner_token)
    : error{message, std::move(subject)}, m_owner_token{std::move(owner_token)} {}

const char* to_string(outcome value) noexcept {
    switch (value) {
    case outcome::done: return "done";
    case outcome::refused: return "refused";
    case outcome::unknown: return "unknown";
    }
    return "?";
}

const char* to_string(loss_reason value) noexcept {
    switch (value) {
    case loss_reason::refused: return "refused";
    case loss_reason::expired: return "expired";
    case loss_reason::max_hold: return "max_hold";
    }
    return "?";
}

namespace internal {

namespace {

// SQLSTATEs after which the statement may or may not have taken effect:
// connection exceptions (class 08), the backend terminated by an administrator
// or a crash (57P01..57P03), and statement_completion_unknown (40003).
bool is_unknown_sqlstate(const std::string& state) noexcept {
    return state.rfind("08", 0) == 0 || state == "57P01" || state == "57P02" || state == "57P03" || state == "40003";
}

// libpqxx's text is "ERROR:  message\nDETAIL: ...\nHINT: ...\n"; keep it minus
// the severity prefix and the trailing newline.
std::string server_message(const char* what) {
    std::string text{what};
    for (const char* prefix : {"ERROR:  ", "FATAL:  "})
        if (text.rfind(prefix, 0) == 0) text.erase(0, std::strlen(prefix));
    while (!text.empty() && (text.back() == '\n' || text.back() == ' '))
        text.pop_back();
    return text;
}

// libpqxx 6.4 leaves sqlstate() empty for some of its exception subclasses;
// recover the SQLSTATE from the type for those the mapping needs.
std::string sqlstate_of(const pqxx::sql_error& e) {
    if (!e.sqlstate().empty()) return e.sqlstate();
    if (dynamic_cast<const pqxx::insufficient_privilege*>(&e) != nullptr) return "42501";
    return {};
}

} // namespace

bool is_commit_uncertain_notice(std::string_view message) noexcept {
    // PostgreSQL: WARNING "canceling wait for synchronous replication due to user
    // request" / "canceling the wait for synchronous replication and terminating
    // connection due to administrator command", DETAIL "The transaction has
    // already committed locally, but might not have been replicated to the standby."
    return message.find("synchronous replication") != std::string_view::npos ||
           message.find("committed locally") != std::string_view::npos;
}

bool is_unknown_outcome(const std::exception& e) noexcept {
    if (dynamic_cast<const pqxx::broken_connection*>(&e) != nullptr) return true;
    if (dynamic_cast<const pqxx::in_doubt_error*>(&e) != nullptr) return true;
    if (dynamic_cast<const unknown_outcome_error*>(&e) != nullptr) return true;
    if (const auto* sql = dynamic_cast<const pqxx::sql_error*>(&e)) return is_unknown_sqlstate(sqlstate_of(*sql));
    return false;
}

void rethrow_mapped(std::string_view subject_view, std::string_view owner_token) {
    const std::string subject{subject_view};
    try {
        throw;
    } catch (const dlock::error&) {
        throw;
    } catch (const pqxx::sql_error& e) {
        const std::string state = sqlstate_of(e);
        const std::string message = server_message(e.what());
        if (is_unknown_sqlstate(state)) throw unknown_outcome_error{message, subject, std::string{owner_token}};
        // pg_dlock 1.1 raises PD001/PD002; 1.0 raised DL001/DL002 (accepted
        // while servers of both versions are in use).
        if (state == "PD001" || state == "DL001") throw stale_token_error{message, subject, state};
        if (state == "PD002" || state == "DL002") throw not_held_error{message, subject, state};
        if (state == "55P03") throw busy_error{message, subject, state};
        if (state == "22023" || state == "22004") throw invalid_argument_error{message, subject, state};
        // PD020: the name is held as another kind -- the caller's mistake
        if (state == "PD020") throw invalid_argument_error{message, subject, state};
        if (state == "42501") throw permission_error{message, subject, state};
        throw server_error{message, subject, state};
    } catch (const pqxx::broken_connection& e) {
        throw unknown_outcome_error{server_message(e.what()), subject, std::string{owner_token}};
    } catch (const pqxx::in_doubt_error& e) {
        throw unknown_outcome_error{server_message(e.what()), subject, std::string{owner_token}};
    } catch (const pqxx::argument_error& e) {
        throw invalid_argument_error{e.what(), subject};
    } catch (const pqxx::conversion_error& e) {
        throw invalid_argument_error{e.what(), subject};
    } catch (const std::exception& e) {
        throw error{e.what(), subject};
    }
}

bool notice_watch::operator()(const char message[]) noexcept {
    if (message != nullptr && is_commit_uncertain_notice(message)) m_uncertain = true;
    return true;
}

} // namespace internal
} // namespace dlock
