// dlock/errors.hpp -- the exception types of the pg_dlock client.
//
// Every server error passes through one mapping (src/errors.cpp) from its
// SQLSTATE to one of these types, and every type carries the lock or resource
// name the call was about. Callers should catch by type, never by message.
#pragma once

#include <stdexcept>
#include <string>

namespace dlock {

/// Base of every exception the library throws.
class error : public std::runtime_error {
public:
    error(const std::string& message, std::string subject, std::string sqlstate = {});

    /// The lock name (or fenced resource name) the failed call was about.
    [[nodiscard]] const std::string& subject() const noexcept { return m_subject; }
    /// The server's SQLSTATE, empty when the error did not come from the server.
    [[nodiscard]] const std::string& sqlstate() const noexcept { return m_sqlstate; }

private:
    std::string m_subject;
    std::string m_sqlstate;
};

/// PD001 (1.0 servers: DL001): the fencing token is below the highest one the resource accepted.
class stale_token_error : public error {
public:
    using error::error;
};

/// PD002 (1.0 servers: DL002): the lock is not held with this fencing token (expired, released or taken over).
class not_held_error : public error {
public:
    using error::error;
};

/// 55P03: another owner holds the lock and the wait ran out.
class busy_error : public error {
public:
    using error::error;
};

/// 22023 / 22004: an invalid or missing argument (empty or over-long name, bad ttl, negative wait,
/// a semaphore's permits that disagree with its live permits); PD020: a name held as another kind.
class invalid_argument_error : public error {
public:
    using error::error;
};

/// 42501: the role may not call this function.
class permission_error : public error {
public:
    using error::error;
};

/// No connection could be made; nothing was sent to the server.
class connection_error : public error {
public:
    using error::error;
};

/// The call may or may not have taken effect: the connection broke while it was in
/// flight, the commit was in doubt, or the commit reported success while canceling
/// its wait for synchronous replication. Neither success nor failure.
class unknown_outcome_error : public error {
public:
    unknown_outcome_error(const std::string& message, std::string subject, std::string owner_token);

    /// The owner token the uncertain call used: a retry with the same token is safe.
    [[nodiscard]] const std::string& owner_token() const noexcept { return m_owner_token; }

private:
    std::string m_owner_token;
};

/// Any other server error (e.g. 25006 when the server is a read-only standby).
class server_error : public error {
public:
    using error::error;
};

} // namespace dlock
